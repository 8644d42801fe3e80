import type { SwaggerTransform, SwaggerTransformObject } from '@fastify/swagger';
import { createJsonSchemaTransform, createJsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  agentViewSchema,
  apiKeyViewSchema,
  approvalViewSchema,
  createdApiKeySchema,
  createdWebhookSchema,
  runFileListSchema,
  runFileSchema,
  runStepSchema,
  runViewSchema,
  scheduleViewSchema,
  sessionViewSchema,
  stepPageSchema,
  uploadedFileSchema,
  webhookDeliveryPageSchema,
  webhookViewSchema,
} from '../../../libs/contracts/index.js';
import {
  agentVersionViewSchema,
  approvalListSchema,
  createdProfileSchema,
  errorBodySchema,
  modelListSchema,
  personControlViewSchema,
  profileListSchema,
  restProfileViewSchema,
  runDetailSchema,
  runPageSchema,
  webhookListSchema,
} from '../../../libs/contracts/rest-views.js';

/**
 * The REST API's OpenAPI 3.1 document. Named schemas become `components.schemas` (read
 * through this registry, not zod's global one, so no other document of the process changes), each
 * route declares every status it answers, and every failure is the one `Error` component.
 */
export const restSchemas = z.registry<{ id?: string }>();

const NAMED_SCHEMAS: Array<[z.ZodType, string]> = [
  [errorBodySchema, 'Error'],
  [runViewSchema, 'Run'],
  [runDetailSchema, 'RunDetail'],
  [runPageSchema, 'RunPage'],
  [runStepSchema, 'RunStep'],
  [runFileSchema, 'RunFile'],
  [runFileListSchema, 'RunFileList'],
  [stepPageSchema, 'StepPage'],
  [approvalViewSchema, 'Approval'],
  [approvalListSchema, 'ApprovalList'],
  [personControlViewSchema, 'PersonControl'],
  [sessionViewSchema, 'Session'],
  [agentViewSchema, 'Agent'],
  [agentVersionViewSchema, 'AgentVersion'],
  [modelListSchema, 'ModelList'],
  [restProfileViewSchema, 'Profile'],
  [createdProfileSchema, 'CreatedProfile'],
  [profileListSchema, 'ProfileList'],
  [apiKeyViewSchema, 'ApiKey'],
  [createdApiKeySchema, 'CreatedApiKey'],
  [webhookViewSchema, 'Webhook'],
  [createdWebhookSchema, 'CreatedWebhook'],
  [webhookListSchema, 'WebhookList'],
  [webhookDeliveryPageSchema, 'WebhookDeliveryPage'],
  [scheduleViewSchema, 'Schedule'],
  [uploadedFileSchema, 'UploadedFile'],
];
/** Names a request body in the document, with an example a reader can send as it is. */
export function namedBody<T extends z.ZodType>(schema: T, id: string, example: unknown): T {
  name(schema, { id });
  bodyExamples.set(`${id}Input`, example);
  if (schema.safeParse(undefined).success) optionalBodies.add(`${id}Input`);
  return schema;
}

/**
 * Bodies the document shows that no route schema validates, by `METHOD url`: a multipart upload is
 * read by its route as it streams in, so its schema is for readers alone.
 */
const documentedBodies = new Map<string, { mediaType: string; schema: z.ZodType }>();

/** Shows `schema` as the `mediaType` body of the route `method url` in the document only. */
export function documentBody(method: string, url: string, mediaType: string, schema: z.ZodType): void {
  documentedBodies.set(`${method} ${url}`, { mediaType, schema });
}

/** Request bodies that may be left out (their schema takes `undefined`), by component name. */
const optionalBodies = new Set<string>();

/**
 * Request bodies' examples, by component name: set on the request's media type, since zod leaves a
 * schema's own `examples` out of the input side of any schema that transforms.
 */
const bodyExamples = new Map<string, unknown>();

/** The failures a route may answer besides the ones every authenticated route may. */
export type ErrorStatus = 400 | 403 | 404 | 409 | 413 | 422;

/**
 * A route's answers: its successes, and the failures it can give, each `{error: {code, message}}`.
 * Every authenticated route may answer 401 (no key, a wrong key or a missing scope), 429 (over its
 * key's rate, or too many failed authentications), 500 and 503 (the store did not answer).
 */
export function answers<T extends Record<number, unknown>>(successes: T, ...failures: ErrorStatus[]) {
  const errors = Object.fromEntries(
    [...failures, 401, 429, 500, 503].map((status) => [status, errorBodySchema]),
  ) as Record<ErrorStatus | 401 | 429 | 500 | 503, typeof errorBodySchema>;
  return { ...successes, ...errors };
}

/** A route with a JSON body may also answer 400 (not JSON), 413 (too large) and 422 (does not fit). */
export const BODY_FAILURES: ErrorStatus[] = [400, 413, 422];

/** What each status means, where a route does not say more. */
const STATUS_DESCRIPTIONS: Record<string, string> = {
  '200': 'OK',
  '201': 'Created',
  '204': 'Done; no body',
  '400': 'Bad request: not JSON, or a query value out of its range',
  '401': 'No API key, a wrong one, or a key without the scope this route needs',
  '403':
    'Refused to this key: no key of the creation chain of the key driving a run over MCP decides its approvals, and a key makes keys only with scopes it holds',
  '404': 'Not found (another tenant’s record is not found either)',
  '409': 'Conflict with the record’s state (or a stored record that cannot be read: record_unreadable)',
  '413': 'Body over 64 KiB',
  '422': 'The body, path or query does not fit its schema',
  '429':
    'Over the key’s request rate, too many failed authentications, or (making a key) the tenant’s bound on keys; see Retry-After',
  '500': 'Internal error',
  '503': 'The store did not answer; retry shortly',
};

/**
 * z.json() is a recursive schema made anew at each use; zod would emit each as an unnamed `$defs`
 * entry that the document never holds. For the document only, each use is swapped for this one
 * named `JsonValue` (copies of the schemas that hold one are made; the routes keep their own).
 */
const JSON_VALUE = z.json();
restSchemas.add(JSON_VALUE, { id: 'JsonValue' });

const documented = new WeakMap<z.ZodType, z.ZodType>();

function isJsonValue(schema: z.ZodType): boolean {
  if (schema.def.type !== 'lazy') return false;
  const inner = (schema as z.ZodLazy<z.ZodType>).unwrap();
  if (inner.def.type !== 'union') return false;
  const options = (inner as z.ZodUnion).options as unknown as z.ZodType[];
  const types = options.map((option) => option.def.type).join(',');
  const selfReferent = options.some(
    (option) => option.def.type === 'array' && (option as z.ZodArray<z.ZodType>).element === schema,
  );
  return types === 'string,number,boolean,null,array,record' && selfReferent;
}

const CHILD_KEYS = ['innerType', 'element', 'in', 'out', 'left', 'right', 'keyType', 'valueType', 'catchall'];

/** `schema` as the document shows it: the same, or a copy whose JSON values are {@link JSON_VALUE}. */
function forDocument<T>(schema: T): T {
  if (!(schema instanceof z.ZodType)) return schema;
  const known = documented.get(schema);
  if (known) return known as T;
  if (isJsonValue(schema)) return JSON_VALUE as T;
  // A schema that refers to itself (another lazy) is shown as it is.
  documented.set(schema, schema);
  const def = schema.def as unknown as Record<string, unknown>;
  const changes: Record<string, unknown> = {};
  for (const key of CHILD_KEYS) {
    const child = def[key];
    const copy = forDocument(child);
    if (copy !== child) changes[key] = copy;
  }
  for (const key of ['options', 'items']) {
    const children = def[key];
    if (!Array.isArray(children)) continue;
    const copies = children.map((child) => forDocument(child));
    if (copies.some((copy, index) => copy !== children[index])) changes[key] = copies;
  }
  if (def.type === 'object') {
    const shape = def.shape as Record<string, unknown>;
    const copies = Object.fromEntries(
      Object.entries(shape).map(([name, field]) => [name, forDocument(field)]),
    );
    if (Object.keys(shape).some((name) => copies[name] !== shape[name])) changes.shape = copies;
  }
  const result = Object.keys(changes).length > 0 ? schema.clone({ ...def, ...changes } as never) : schema;
  documented.set(schema, result);
  return result as T;
}

/** Names `schema` in the document (`components.schemas[id]`). */
function name(schema: z.ZodType, meta: { id: string }): void {
  restSchemas.add(forDocument(schema), meta);
}
for (const [schema, id] of NAMED_SCHEMAS) name(schema, { id });

const zodTransform = createJsonSchemaTransform({ schemaRegistry: restSchemas });
const zodTransformObject = createJsonSchemaTransformObject({ schemaRegistry: restSchemas });

/** Per route: its zod schemas to JSON Schema, named ones as `$ref`s. */
export const restSchemaTransform: SwaggerTransform = (document) => {
  const schema = document.schema as Record<string, unknown> | undefined;
  if (!schema) return zodTransform(document as never);
  const shown: Record<string, unknown> = { ...schema };
  const method = (document as { route?: { method?: unknown } }).route?.method;
  const documentedBody = documentedBodies.get(`${String(method)} ${document.url}`);
  if (documentedBody) {
    shown.body = documentedBody.schema;
    shown.consumes = [documentedBody.mediaType];
  }
  for (const part of ['body', 'querystring', 'params', 'headers']) shown[part] = forDocument(shown[part]);
  if (schema.response) {
    const response: Record<string, unknown> = {};
    for (const [status, answer] of Object.entries(schema.response as Record<string, unknown>)) {
      const content = (answer as { content?: Record<string, { schema: unknown }> }).content;
      response[status] = content
        ? {
            ...(answer as object),
            content: Object.fromEntries(
              Object.entries(content).map(([type, media]) => [
                type,
                { ...media, schema: forDocument(media.schema) },
              ]),
            ),
          }
        : forDocument(answer);
    }
    shown.response = response;
  }
  for (const part of Object.keys(shown)) if (shown[part] === undefined) delete shown[part];
  return zodTransform({ ...document, schema: shown } as never);
};

/**
 * The whole document: the named schemas as components (those no operation reaches are left out),
 * and each response's description where the route gave none.
 */
export const restDocumentTransform: SwaggerTransformObject = (document) => {
  const whole = zodTransformObject(document) as {
    paths?: Record<string, Record<string, DocumentedOperation>>;
    components?: { schemas?: Record<string, unknown> };
  };
  for (const operations of Object.values(whole.paths ?? {}))
    for (const operation of Object.values(operations)) {
      for (const [status, response] of Object.entries(operation.responses ?? {}))
        if (response.description === 'Default Response')
          response.description = STATUS_DESCRIPTIONS[status] ?? response.description;
      const media = operation.requestBody?.content?.['application/json'];
      const body = media?.schema?.$ref?.replace('#/components/schemas/', '') ?? '';
      const example = bodyExamples.get(body);
      if (media && example !== undefined) media.example = example;
      if (operation.requestBody && optionalBodies.has(body)) operation.requestBody.required = false;
    }
  if (whole.components?.schemas) whole.components.schemas = reachedSchemas(whole);
  return whole as ReturnType<SwaggerTransformObject>;
};

interface DocumentedOperation {
  responses?: Record<string, { description?: string }>;
  requestBody?: {
    required?: boolean;
    content?: Record<string, { schema?: { $ref?: string }; example?: unknown }>;
  };
}

/** The component schemas a path reaches, directly or through another component. */
function reachedSchemas(document: {
  paths?: unknown;
  components?: { schemas?: Record<string, unknown> };
}): Record<string, unknown> {
  const all = document.components?.schemas ?? {};
  const reached = new Set<string>();
  const pending: unknown[] = [document.paths];
  const prefix = '#/components/schemas/';
  while (pending.length > 0) {
    const value = pending.pop();
    if (value === null || typeof value !== 'object') continue;
    for (const [key, child] of Object.entries(value)) {
      if (key === '$ref' && typeof child === 'string' && child.startsWith(prefix)) {
        const name = child.slice(prefix.length);
        if (!reached.has(name)) {
          reached.add(name);
          pending.push(all[name]);
        }
      } else pending.push(child);
    }
  }
  return Object.fromEntries(Object.entries(all).filter(([name]) => reached.has(name)));
}
