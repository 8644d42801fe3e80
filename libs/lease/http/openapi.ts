import { isDeepStrictEqual } from 'node:util';
import { z } from 'zod';
import {
  acquireLeaseAnswerSchema,
  actArgsSchema,
  BROWSER_TOOLS_COMPATIBLE_VERSIONS,
  BROWSER_TOOLS_CONTRACT_VERSION,
  browserObservationSchema,
  dataPlaneErrorSchema,
  handoverAnswerSchema,
  leaseAnswerSchema,
  leaseScopeSchema,
  observeArgsSchema,
  observeCallAnswerSchema,
  pageArtifactsSchema,
  pageCallAnswerSchema,
  personControlAnswerSchema,
  personControlEndAnswerSchema,
  personInputAnswerSchema,
  predicateSchema,
  previewCallAnswerSchema,
  profileAnswerSchema,
  profileListAnswerSchema,
  renewalsAnswerSchema,
  workerAnswerSchema,
} from '../../contracts/index.js';
import {
  BROWSER_TOOLS_HEADER,
  DATA_PLANE_OPERATIONS,
  type DataPlaneAnsweredErrorCode,
  type DataPlaneOperation,
  documentAnswerSchema,
  healthAnswerSchema,
  readinessAnswerSchema,
} from './route-table.js';

/**
 * The data plane's OpenAPI 3.1 document, built from the route table the routes register
 * from and the zod schemas they parse with (bodies as their input, answers as their output).
 * `scripts/openapi.ts` writes it to `openapi/data-plane.json`; a worker serves it at `/docs/json`.
 */

/** The header a replayed idempotent answer carries (DESIGN §5). */
export const IDEMPOTENT_REPLAY_HEADER = 'idempotent-replayed';
/** The browser worker's port unless `BROWSER_WORKER_PORT` says otherwise. */
const DEFAULT_WORKER_PORT = '3001';

const SCHEMA_REF = '#/components/schemas/';
type JsonSchema = Record<string, unknown>;

/** The answers' named schemas (output side), by component name. */
const ANSWER_COMPONENTS: ReadonlyArray<[string, z.ZodType]> = [
  ['Profile', profileAnswerSchema],
  ['ProfileList', profileListAnswerSchema],
  ['LeaseScope', leaseScopeSchema],
  ['Lease', leaseAnswerSchema],
  ['AcquiredLease', acquireLeaseAnswerSchema],
  ['RenewalsAnswer', renewalsAnswerSchema],
  ['BrowserObservation', browserObservationSchema],
  ['PageArtifacts', pageArtifactsSchema],
  ['ObserveAnswer', observeCallAnswerSchema],
  ['PageAnswer', pageCallAnswerSchema],
  ['PreviewAnswer', previewCallAnswerSchema],
  ['PersonControl', personControlAnswerSchema],
  ['PersonControlEnd', personControlEndAnswerSchema],
  ['PersonInputAnswer', personInputAnswerSchema],
  ['HandoverAnswer', handoverAnswerSchema],
  ['Worker', workerAnswerSchema],
  ['Health', healthAnswerSchema],
  ['Readiness', readinessAnswerSchema],
  ['DataPlaneError', dataPlaneErrorSchema],
  ['OpenApiDocument', documentAnswerSchema],
];

/** What each named schema is, for its component's description. */
const COMPONENT_DESCRIPTIONS: Readonly<Record<string, string>> = {
  Profile: 'A profile as the data plane shows it: never its sealed state.',
  ProfileList: "A tenant's profiles.",
  LeaseScope:
    'Who holds a lease, for what (ADR-0127 d1): a repeated acquire with this same scope reattaches.',
  Lease:
    'A lease. `provider_ref` names the browser worker that serves it; the next navigate or act carries `sequence + 1`.',
  AcquiredLease: 'A lease as acquire answers it: `created` is false for a reattach.',
  RenewalsAnswer:
    'Each renewal of a batch as `renewLease` answers it alone, in the order sent: its status, and the lease or the error; `replayed` when it is the stored answer of an earlier request with the same key.',
  BrowserObservation: `The page as the model sees it (browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION}): visible text, up to 256 visible controls with references valid for this \`revision\` only, the settle result and the window.`,
  PageArtifacts: "What the worker captured of the settled page: an artifact's name, never the bytes.",
  ObserveAnswer:
    'The lease after the call, the observation, and the evidence key (for the platform, never the model).',
  PageAnswer: "Observe's answer and what navigate or act captured.",
  PreviewAnswer: 'The lease and the outlined screenshot, if one was had.',
  PersonControl: "A person's control of the page: the lease's sequence once it began, and its time bounds.",
  PersonControlEnd:
    'A control as it ended: its bounds, how many input events the person sent (never what they were), and the URL the page shows.',
  PersonInputAnswer: "The lease's sequence after the batch.",
  HandoverAnswer:
    'The lease and what became of a handed-over effect: `applied`, `refused` (with its `code`), `not_applied` (the sequence is now past it) or `unknown`.',
  Worker: 'This browser worker: its id, the profiles it serves, its browser and browser tools contracts.',
  Health: 'Liveness.',
  Readiness: 'Readiness: each check by name.',
  DataPlaneError:
    'Every refusal and failure: a stable code (DESIGN §8), a message, and identifiers or numbers that help the caller. Never page content or a stack trace.',
  OpenApiDocument: 'An OpenAPI 3.1 document.',
  ObserveArgs: '`continuation` pages through a large page; `wait_for` waits for a predicate. Not both.',
  ActArgs: 'One action on an element of an observed revision, with an optional postcondition.',
  Predicate: 'An exact, bounded control role and name with optional state: no selector, pattern or script.',
};

/** The bodies' shared parts (input side); each route's body is named `<OperationId>Request`. */
const REQUEST_COMPONENTS: ReadonlyArray<[string, z.ZodType]> = [
  ['ObserveArgs', observeArgsSchema],
  ['ActArgs', actArgsSchema],
  ['Predicate', predicateSchema],
];

/** What each error status means on this surface, for its response's description. */
const STATUS_MEANING: Readonly<Record<number, string>> = {
  400: 'The URL or the request framing could not be read',
  401: 'No valid data-plane token',
  404: 'No such profile or lease',
  409: 'Refused in the state the profile, lease or page is in',
  413: 'Body over 64 KiB',
  414: 'A path segment over 200 characters',
  415: 'Content type other than application/json',
  422: 'Arguments that are not what the route takes',
  429: 'Too many failed authentications from this address',
  500: 'An unexpected failure (logged; never a stack trace)',
  502: 'The action left but its outcome is unknown (the lease is retired), or a navigation never reached a server (`navigation_failed`: the lease is kept)',
  503: 'The store or the browser is not available; retry shortly',
};

/** A message like the server's for each code, for the examples. */
const EXAMPLE_MESSAGES: Readonly<Record<DataPlaneAnsweredErrorCode, string>> = {
  unauthorized: 'a valid data-plane token is required',
  not_found: 'no lease lse_0123456789',
  profile_unavailable: 'profile shop is leased to run run_abc attempt 1',
  lease_expired: 'lease lse_0123456789 has expired or was revoked',
  sequence_mismatch: "action 3 refused: the lease's last action is 4, so the next is 5",
  idempotency_conflict: 'this Idempotency-Key was used with another request',
  idempotency_in_progress: 'the first request with this Idempotency-Key is still being answered',
  conflict: 'profile shop exists already',
  payload_too_large: 'body over 65536 bytes',
  invalid_arguments: `leasehold-browser-tools: this worker speaks browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION}`,
  validation_failed: 'body.requested_expires_at_ms: expected number, received undefined',
  page_changed: 'revision r1 is no longer current: observe again',
  element_not_found: 'element e7 is not in revision r1',
  action_not_allowed: 'fill is not allowed on a button',
  url_disallowed: 'https://elsewhere.example is not an allowed origin of this profile',
  secret_not_allowed: 'secret pw is for password, one-time-code, username or email fields only',
  person_in_control: 'a person holds the page of lease lse_0123456789; the agent waits for the hand-back',
  person_not_in_control: 'principal:alice does not hold the page of lease lse_0123456789',
  seal_key_mismatch:
    'profile acme/shop was sealed with key 3f9c0a1b2c3d4e5f; browser worker browser-2 holds 0a1b2c3d4e5f6071',
  profile_unreadable:
    "profile acme/shop's sealed state does not open with key 3f9c0a1b2c3d4e5f, the key that sealed it",
  outcome_unknown: 'the action was dispatched and no answer came',
  navigation_failed: 'the navigation never reached a server: net::ERR_NAME_NOT_RESOLVED',
  provider_unavailable: 'the browser context could not be created',
  internal: 'internal error',
  bad_request: 'content-type: expected application/json',
  rate_limited: 'too many failed authentications from this address; retry after 42 s',
  unavailable: 'the store did not answer; retry shortly',
};

/** PascalCase of an operation id: `acquireLease` → `AcquireLease`. */
function pascal(operationId: string): string {
  return operationId.charAt(0).toUpperCase() + operationId.slice(1);
}

/** The document's spelling of a Fastify path: `:tenant` → `{tenant}`. */
export function documentPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function withoutDialect(schema: JsonSchema): JsonSchema {
  const { $schema: _dialect, $id: _id, ...rest } = schema;
  return rest;
}

/** Named schemas of one registry as components, with references between them. */
function componentsOf(
  named: ReadonlyArray<[string, z.ZodType]>,
  io: 'input' | 'output',
): Record<string, JsonSchema> {
  const registry = z.registry<{ id: string }>();
  for (const [id, schema] of named) registry.add(schema, { id });
  const { schemas } = z.toJSONSchema(registry, {
    io,
    target: 'draft-2020-12',
    unrepresentable: 'any',
    uri: (id) => `${SCHEMA_REF}${id}`,
  });
  return Object.fromEntries(
    Object.entries(schemas).map(([id, schema]) => {
      const description = COMPONENT_DESCRIPTIONS[id];
      return [id, { ...(description ? { description } : {}), ...withoutDialect(schema) }];
    }),
  );
}

/** Request bodies as their input (defaults optional), answers as their output; one name, one schema. */
function allComponents(): Record<string, JsonSchema> {
  const requests: Array<[string, z.ZodType]> = [...REQUEST_COMPONENTS];
  for (const operation of Object.values(DATA_PLANE_OPERATIONS) as DataPlaneOperation[]) {
    const body = operation.documentedBody ?? operation.body;
    if (body) requests.push([`${pascal(operation.operationId)}Request`, body]);
  }
  const input = componentsOf(requests, 'input');
  const output = componentsOf(ANSWER_COMPONENTS, 'output');
  for (const [id, schema] of Object.entries(output))
    if (id in input && !isDeepStrictEqual(input[id], schema))
      throw new Error(`component ${id} differs between the request and the answer side`);
  return { ...input, ...output };
}

function answerComponentName(schema: z.ZodType): string {
  const found = ANSWER_COMPONENTS.find(([, named]) => named === schema);
  if (found) return found[0];
  throw new Error('an answer schema without a component name: add it to ANSWER_COMPONENTS');
}

/** The refusals every route of its kind shares, merged with the route's own. */
function refusalsOf(operation: DataPlaneOperation): Map<number, Set<DataPlaneAnsweredErrorCode>> {
  const refusals = new Map<number, Set<DataPlaneAnsweredErrorCode>>();
  const add = (status: number, ...codes: DataPlaneAnsweredErrorCode[]) => {
    const set = refusals.get(status) ?? new Set();
    for (const code of codes) set.add(code);
    refusals.set(status, set);
  };
  if (!operation.public) {
    add(401, 'unauthorized');
    add(429, 'rate_limited');
    add(503, 'unavailable');
  }
  // Every route refuses a browser tools contract this worker does not take.
  add(422, 'invalid_arguments');
  if (operation.params) {
    add(400, 'bad_request');
    add(414, 'bad_request');
    add(422, 'validation_failed');
  }
  if (operation.body) {
    add(400, 'bad_request');
    add(413, 'payload_too_large');
    add(415, 'bad_request');
    add(422, 'validation_failed');
  }
  if (operation.idempotent) {
    add(409, 'idempotency_conflict', 'idempotency_in_progress');
    add(422, 'validation_failed');
  }
  for (const [status, codes] of Object.entries(operation.refusals)) add(Number(status), ...(codes ?? []));
  add(500, 'internal');
  return refusals;
}

function refusalResponse(status: number, codes: Set<DataPlaneAnsweredErrorCode>): JsonSchema {
  const listed = [...codes];
  const first = listed[0] ?? 'internal';
  const headers: Record<string, JsonSchema> = {};
  if (status === 401)
    headers['WWW-Authenticate'] = { description: 'The challenge: `Bearer`.', schema: { type: 'string' } };
  if (status === 429)
    headers['Retry-After'] = {
      description: 'Seconds until the address may try again.',
      schema: { type: 'integer' },
    };
  return {
    description: `${STATUS_MEANING[status] ?? 'Refused'}: ${listed.map((code) => `\`${code}\``).join(', ')}.`,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: {
      'application/json': {
        schema: { $ref: `${SCHEMA_REF}DataPlaneError` },
        example: { error: { code: first, message: EXAMPLE_MESSAGES[first] } },
      },
    },
  };
}

function pathParameters(operation: DataPlaneOperation): JsonSchema[] {
  if (!operation.params) return [];
  const schema = z.toJSONSchema(operation.params, { io: 'input', target: 'draft-2020-12' }) as {
    properties: Record<string, JsonSchema>;
  };
  return Object.entries(schema.properties).map(([name, property]) => ({
    name,
    in: 'path',
    required: true,
    schema: property,
  }));
}

function operationObject(operation: DataPlaneOperation): JsonSchema {
  const parameters: JsonSchema[] = [...pathParameters(operation)];
  if (operation.idempotent) parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
  parameters.push({ $ref: '#/components/parameters/BrowserToolsContract' });

  const responses: Record<string, JsonSchema> = {};
  for (const [status, answer] of Object.entries(operation.answers)) {
    const content = answer.schema
      ? { 'application/json': { schema: { $ref: `${SCHEMA_REF}${answerComponentName(answer.schema)}` } } }
      : { [answer.contentType ?? 'text/plain']: { schema: { type: 'string' } } };
    responses[status] = {
      description: answer.description,
      ...(operation.idempotent
        ? { headers: { [IDEMPOTENT_REPLAY_HEADER]: { $ref: '#/components/headers/IdempotentReplayed' } } }
        : {}),
      content,
    };
  }
  for (const [status, codes] of refusalsOf(operation))
    responses[String(status)] ??= refusalResponse(status, codes);

  const body = operation.documentedBody ?? operation.body;
  return {
    operationId: operation.operationId,
    summary: operation.summary,
    description: operation.description,
    tags: [operation.tag],
    ...(operation.public ? { security: [] } : {}),
    parameters,
    ...(body
      ? {
          requestBody: {
            required: operation.bodyOptional !== true,
            content: {
              'application/json': {
                schema: { $ref: `${SCHEMA_REF}${pascal(operation.operationId)}Request` },
                ...(operation.bodyExample ? { example: operation.bodyExample } : {}),
              },
            },
          },
        }
      : {}),
    responses,
  };
}

/** Every route of the data plane, its answers and refusals, as an OpenAPI 3.1 document. */
export function dataPlaneOpenApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, JsonSchema>> = {};
  for (const operation of Object.values(DATA_PLANE_OPERATIONS) as DataPlaneOperation[]) {
    const path = documentPath(operation.url);
    paths[path] ??= {};
    paths[path][operation.method.toLowerCase()] = operationObject(operation);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'Leasehold data plane',
      version: '1.0.0',
      description: `A browser worker's data plane (DESIGN §5): profiles, leases on them, and the lease-scoped page routes of browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION}. Every route but the ops routes needs the data-plane token. Errors are \`{"error": {"code", "message", …}}\` with a stable code.`,
    },
    servers: [
      {
        url: 'http://{host}:{port}',
        description: 'A browser worker: each serves its own data plane (BROWSER_WORKER_PORT).',
        variables: { host: { default: 'localhost' }, port: { default: DEFAULT_WORKER_PORT } },
      },
    ],
    security: [{ dataPlaneToken: [] }],
    tags: [
      { name: 'profiles', description: "A tenant's browser profiles: owner, allowed origins, sealed state." },
      { name: 'leases', description: 'Leases on a profile: acquire, renew, close (ADR-0127).' },
      {
        name: 'pages',
        description: "The lease's page: navigate, observe, act, preview (browser tools contract).",
      },
      {
        name: 'person',
        description: "A person on the lease's page: the live view, person control and the holder's input.",
      },
      { name: 'worker', description: 'This browser worker and this document.' },
      { name: 'ops', description: 'Liveness, readiness and metrics: public.' },
    ],
    paths,
    components: {
      securitySchemes: {
        dataPlaneToken: {
          type: 'http',
          scheme: 'bearer',
          description:
            'The data-plane token the run workers share with the browser workers (LEASEHOLD_DATA_PLANE_TOKEN).',
        },
      },
      parameters: {
        IdempotencyKey: {
          name: 'Idempotency-Key',
          in: 'header',
          required: true,
          description:
            'The exact idempotency rule (DESIGN §5): the same key with the same request replays the stored answer (with `idempotent-replayed: true`); with another request it is `idempotency_conflict`.',
          schema: { type: 'string', pattern: '^[A-Za-z0-9_.:-]{1,128}$' },
        },
        BrowserToolsContract: {
          name: BROWSER_TOOLS_HEADER,
          in: 'header',
          required: false,
          description: `The browser tools contract the caller speaks; unnamed, the current one (${BROWSER_TOOLS_CONTRACT_VERSION}). Any other is refused \`invalid_arguments\`.`,
          schema: { type: 'string', enum: [...BROWSER_TOOLS_COMPATIBLE_VERSIONS] },
        },
      },
      headers: {
        IdempotentReplayed: {
          description: '`true` when this answer is the stored one of an earlier request with the same key.',
          schema: { type: 'string', enum: ['true'] },
        },
      },
      schemas: allComponents(),
    },
  };
}
