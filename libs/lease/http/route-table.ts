import { z } from 'zod';
import {
  acquireLeaseAnswerSchema,
  acquireLeaseSchema,
  actArgsSchema,
  actSchema,
  artifactNameSchema,
  BROWSER_TOOLS_CONTRACT_VERSION,
  closeLeaseSchema,
  createProfileSchema,
  type DATA_PLANE_ANSWERED_ERROR_CODES,
  endPersonControlSchema,
  handoverAnswerSchema,
  handoverSchema,
  leaseAnswerSchema,
  leaseIdSchema,
  navigateSchema,
  observeArgsSchema,
  observeCallAnswerSchema,
  observeSchema,
  pageCallAnswerSchema,
  personControlAnswerSchema,
  personControlEndAnswerSchema,
  personInputAnswerSchema,
  personInputSchema,
  previewCallAnswerSchema,
  profileAnswerSchema,
  profileIdSchema,
  profileListAnswerSchema,
  renewalsAnswerSchema,
  renewalsSchema,
  renewLeaseSchema,
  startPersonControlSchema,
  tenantIdSchema,
  workerAnswerSchema,
} from '../../contracts/index.js';

/**
 * Every route of the data plane, as data. The routes register from this table (method,
 * path, and the schemas their answers are serialized through) and the OpenAPI document is built
 * from it, so the two cannot drift; the server refuses to start with a route the table lacks
 * (`refuseUndocumentedRoutes`).
 */

/**
 * Every profile route names the tenant in its path: profile ids are unique
 * within a tenant, so `/v1/tenants/a/profiles/shop` and `/v1/tenants/b/profiles/shop` are two profiles.
 */
const TENANT_PROFILES = '/v1/tenants/:tenant/profiles';
const PROFILE = `${TENANT_PROFILES}/:profileId`;
const LEASE = `${PROFILE}/leases/:leaseId`;

export const tenantParams = z.object({ tenant: tenantIdSchema });
export const profileParams = tenantParams.extend({ profileId: profileIdSchema });
export const leaseParams = profileParams.extend({ leaseId: leaseIdSchema });

/** A preview names an element of an observed revision, as an act does. */
export const previewSchema = z.object({
  deadline_ms: z.number().int().min(1).max(120_000).default(10_000),
  args: z.object({ revision: z.string().min(1).max(64), element: z.string().min(1).max(64) }),
  /**
   * The screenshot's artifact name, chosen by the caller so an approval naming it can be written
   * while it is taken (a random `preview-….jpg`); a fresh one when absent. A name already used by
   * the run answers no screenshot.
   */
  screenshot: artifactNameSchema.optional(),
});

/** What `/healthz` answers while the process lives. */
export const healthAnswerSchema = z.object({ status: z.literal('ok') });
/** What `/readyz` answers: every check named, 200 when all pass, 503 naming the failing ones. */
export const readinessAnswerSchema = z.object({
  status: z.enum(['ready', 'not_ready']),
  checks: z.array(z.object({ name: z.string(), ok: z.boolean(), error: z.string().optional() })),
});
/** The document itself, as `/docs/json` answers it. */
export const documentAnswerSchema = z.record(z.string(), z.unknown());

/**
 * The header a caller may name the browser tools contract it speaks by (`1.2.0`). A
 * caller that names none is served as one of the current contract.
 */
export const BROWSER_TOOLS_HEADER = 'leasehold-browser-tools';

export type DataPlaneAnsweredErrorCode = (typeof DATA_PLANE_ANSWERED_ERROR_CODES)[number];

/** One answer a route gives on success (or, for `/readyz`, when not ready). */
export interface OperationAnswer {
  description: string;
  /** The JSON body's schema; absent for a body that is not JSON (then `contentType` says what). */
  schema?: z.ZodType;
  contentType?: string;
}

export interface DataPlaneOperation {
  operationId: string;
  method: 'GET' | 'POST' | 'DELETE';
  /** Fastify's spelling (`:tenant`); the document spells it `{tenant}`. */
  url: string;
  tag: 'profiles' | 'leases' | 'pages' | 'person' | 'worker' | 'ops';
  summary: string;
  description: string;
  /** Path parameters as the route parses them. */
  params?: z.ZodObject;
  /** The JSON body as the route parses it. */
  body?: z.ZodType;
  /**
   * The body as documented when it is stricter than what the route parses: the page routes hand
   * `args` to the page engine, which refuses arguments outside the browser tools contract with
   * `invalid_arguments` (422), so the document states that contract.
   */
  documentedBody?: z.ZodType;
  /** Whether a body may be left out (the page routes without arguments default it to `{}`). */
  bodyOptional?: true;
  /** A body as a caller would send it, for the document. */
  bodyExample?: Readonly<Record<string, unknown>>;
  /** The exact idempotency rule of DESIGN §5: an `Idempotency-Key` header, replayed or refused. */
  idempotent?: true;
  /** Public ops routes: no token. */
  public?: true;
  answers: Readonly<Record<number, OperationAnswer>>;
  /** The refusals of the route's own, by status; those every route shares are added by the document. */
  refusals: Readonly<Partial<Record<number, readonly DataPlaneAnsweredErrorCode[]>>>;
}

const PAGE_REFUSALS = {
  404: ['not_found'],
  409: [
    'lease_expired',
    'person_in_control',
    'page_changed',
    'element_not_found',
    'action_not_allowed',
    'url_disallowed',
  ],
  422: ['validation_failed', 'invalid_arguments'],
  502: ['outcome_unknown'],
  503: ['provider_unavailable'],
} as const satisfies DataPlaneOperation['refusals'];

const EFFECT_REFUSALS = {
  ...PAGE_REFUSALS,
  409: ['sequence_mismatch', ...PAGE_REFUSALS[409]],
} as const satisfies DataPlaneOperation['refusals'];

/** Navigate's: an effect's, and `navigation_failed` when the request never reached a server. */
const NAVIGATE_REFUSALS = {
  ...EFFECT_REFUSALS,
  502: ['outcome_unknown', 'navigation_failed'],
} as const satisfies DataPlaneOperation['refusals'];

export const DATA_PLANE_OPERATIONS = {
  createProfile: {
    operationId: 'createProfile',
    method: 'POST',
    url: TENANT_PROFILES,
    tag: 'profiles',
    summary: 'Create a profile',
    description:
      "Creates a profile of the tenant the path names: its owner, the origins its pages may visit, and whether it is protected against other principals. `tenant` in the body may be left out; when given it must be the path's.",
    params: tenantParams,
    body: createProfileSchema,
    documentedBody: createProfileSchema.partial({ tenant: true }),
    bodyExample: { id: 'shop', principal: 'ops@example.com', allowed_origins: ['https://shop.example.com'] },
    answers: { 201: { description: 'The profile, created.', schema: profileAnswerSchema } },
    refusals: { 409: ['conflict'], 422: ['validation_failed'] },
  },
  listProfiles: {
    operationId: 'listProfiles',
    method: 'GET',
    url: TENANT_PROFILES,
    tag: 'profiles',
    summary: "List a tenant's profiles",
    description: 'Every profile of the tenant, never its sealed state.',
    params: tenantParams,
    answers: { 200: { description: "The tenant's profiles.", schema: profileListAnswerSchema } },
    refusals: { 422: ['validation_failed'] },
  },
  getProfile: {
    operationId: 'getProfile',
    method: 'GET',
    url: PROFILE,
    tag: 'profiles',
    summary: 'Get a profile',
    description: 'One profile of the tenant, never its sealed state.',
    params: profileParams,
    answers: { 200: { description: 'The profile.', schema: profileAnswerSchema } },
    refusals: { 404: ['not_found'], 422: ['validation_failed'] },
  },
  acquireLease: {
    operationId: 'acquireLease',
    method: 'POST',
    url: `${PROFILE}/leases`,
    tag: 'leases',
    summary: 'Acquire a lease on a profile',
    description:
      "Admission first (the profile exists, belongs to the tenant, is served here, is not protected against the principal), then a lease is published and a browser context opened from the profile's sealed state. Expiry is min(requested, now + 15 min, acquired + 60 min). A live lease with the same scope is answered as it is (200, `created: false`: a reattach, ADR-0127 d1); another live scope is `profile_unavailable`, naming the holding run. Sealed state that names a key this worker does not hold is `seal_key_mismatch`, and state that does not open with the key that sealed it `profile_unreadable`: neither is worth a retry.",
    params: profileParams,
    body: acquireLeaseSchema,
    bodyExample: {
      tenant: 'acme',
      principal: 'ops@example.com',
      run_id: 'run_7f3k2m9q',
      attempt: 1,
      requested_expires_at_ms: 1_767_225_600_000,
    },
    idempotent: true,
    answers: {
      201: { description: 'A new lease.', schema: acquireLeaseAnswerSchema },
      200: {
        description: 'The live lease of the same scope, reattached: same id, current expiry and sequence.',
        schema: acquireLeaseAnswerSchema,
      },
    },
    refusals: {
      404: ['not_found'],
      409: ['profile_unavailable', 'seal_key_mismatch', 'profile_unreadable'],
      422: ['validation_failed'],
      503: ['provider_unavailable'],
    },
  },
  getLease: {
    operationId: 'getLease',
    method: 'GET',
    url: LEASE,
    tag: 'leases',
    summary: 'Get a lease',
    description: 'The lease as it is now: state, expiry, action sequence and effects.',
    params: leaseParams,
    answers: { 200: { description: 'The lease.', schema: leaseAnswerSchema } },
    refusals: { 404: ['not_found'], 422: ['validation_failed'] },
  },
  renewLease: {
    operationId: 'renewLease',
    method: 'POST',
    url: `${LEASE}/renew`,
    tag: 'leases',
    summary: 'Renew a lease',
    description:
      'Moves the expiry to min(requested, now + 15 min, acquired + 60 min). An expired or revoked lease is `lease_expired`, and the service closes it unsealed.',
    params: leaseParams,
    body: renewLeaseSchema,
    bodyExample: { requested_expires_at_ms: 1_767_226_500_000 },
    idempotent: true,
    answers: { 200: { description: 'The lease with its new expiry.', schema: leaseAnswerSchema } },
    refusals: { 404: ['not_found'], 409: ['lease_expired'], 422: ['validation_failed'] },
  },
  renewLeases: {
    operationId: 'renewLeases',
    method: 'POST',
    url: '/v1/renewals',
    tag: 'leases',
    summary: 'Renew many leases',
    description:
      'Up to 150 renewals of leases this worker serves in one request, each answered as `renewLease` answers it alone: its status and the lease, or its error (`not_found`, `lease_expired`, `idempotency_conflict`, `idempotency_in_progress`). Each item carries the Idempotency-Key `renewLease` would: the same key with the same renewal replays the stored answer (`replayed`), whichever route stored it. A malformed body, or more than 150 items, is refused whole before anything is written.',
    body: renewalsSchema,
    bodyExample: {
      renewals: [
        {
          tenant: 'acme',
          profile_id: 'shop',
          lease_id: 'lse_Q2x9aK3mZp1vR8tY',
          requested_expires_at_ms: 1_767_226_500_000,
          idempotency_key: 'renew.8d0f5c2a9b1e4f7c3a6d2b8e5f1c9a7d3b6e2f8a4c1d9e5b',
        },
      ],
    },
    answers: {
      200: { description: 'Each renewal answered, in the order sent.', schema: renewalsAnswerSchema },
    },
    refusals: { 422: ['validation_failed'] },
  },
  closeLease: {
    operationId: 'closeLease',
    method: 'POST',
    url: `${LEASE}/close`,
    tag: 'leases',
    summary: 'Close a lease',
    description:
      "Seals the context's storage state into the profile when `seal` is true and the lease is unexpired, then disposes the context. A lease past its expiry is closed unsealed (ADR-0127 d8); closing a closed lease answers it as it is.",
    params: leaseParams,
    body: closeLeaseSchema,
    bodyExample: { seal: true },
    idempotent: true,
    answers: { 200: { description: 'The lease, closed.', schema: leaseAnswerSchema } },
    refusals: { 404: ['not_found'], 422: ['validation_failed'] },
  },
  navigate: {
    operationId: 'navigate',
    method: 'POST',
    url: `${LEASE}/navigate`,
    tag: 'pages',
    summary: "Navigate the lease's page",
    description:
      "Loads `url` in the lease's current page and settles (ADR-0159). An effect: applied only when `sequence` is exactly the lease's next, which it advances atomically with the effect. An origin outside the profile's allowed list is `url_disallowed`. A request that never reached a server (name not resolved, connection refused, TLS handshake failed) is `navigation_failed` with Chromium's `net_error`, `dispatched` and `sequence`, and beside the error the lease and an observation of the error page the lease now shows; the lease stays usable.",
    params: leaseParams,
    body: navigateSchema,
    bodyExample: { sequence: 1, url: 'https://shop.example.com/cart' },
    answers: {
      200: {
        description: 'The lease after the call, the settled observation, and the screenshot taken.',
        schema: pageCallAnswerSchema,
      },
    },
    refusals: NAVIGATE_REFUSALS,
  },
  observe: {
    operationId: 'observe',
    method: 'POST',
    url: `${LEASE}/observe`,
    tag: 'pages',
    summary: "Observe the lease's page",
    description: `The page's visible controls and text (browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION}): the next window of a large page with \`continuation\`, or waiting for a predicate with \`wait_for\`. Not an effect: no sequence.`,
    params: leaseParams,
    body: observeSchema,
    documentedBody: observeSchema.extend({ args: observeArgsSchema.optional() }),
    bodyOptional: true,
    bodyExample: { args: { wait_for: { role: 'button', name: 'Pay', disabled: false } } },
    answers: { 200: { description: 'The lease and the observation.', schema: observeCallAnswerSchema } },
    refusals: PAGE_REFUSALS,
  },
  act: {
    operationId: 'act',
    method: 'POST',
    url: `${LEASE}/act`,
    tag: 'pages',
    summary: 'Act on an observed element',
    description: `One action on an element of an observed revision, then settling and, with a postcondition, polling for it (browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION}). An effect: applied only when \`sequence\` is exactly the next. Never retried or re-targeted; a refusal after dispatch says so (\`dispatched\`, \`sequence\`). A fill naming a run's declared secret (\`{{secret:NAME}}\`) into a field or origin the secret is not for is refused \`secret_not_allowed\` before dispatch. An \`upload\` sets a file input's files to an uploaded file the run's input lists (\`file\`), read from the artifact store; refused before dispatch \`action_not_allowed\` on any other element and \`invalid_arguments\` for a file that is not the run's.`,
    params: leaseParams,
    body: actSchema,
    documentedBody: actSchema.extend({ args: actArgsSchema }),
    bodyExample: {
      sequence: 2,
      args: {
        revision: 'r_5cx1',
        element: 'e12',
        action: 'click',
        postcondition: { role: 'heading', name: 'Order placed' },
      },
    },
    answers: {
      200: {
        description: 'The lease after the call, the settled observation, and the screenshot taken.',
        schema: pageCallAnswerSchema,
      },
    },
    refusals: { ...EFFECT_REFUSALS, 409: [...EFFECT_REFUSALS[409], 'secret_not_allowed'] },
  },
  handover: {
    operationId: 'handover',
    method: 'POST',
    url: `${LEASE}/handover`,
    tag: 'pages',
    summary: 'Learn what became of a handed-over effect',
    description:
      "A run's next owner was handed an effect (navigate or act) its last owner sent with `sequence` and never had answered. Answered after the lease's calls in flight: `applied`, `refused` (after dispatch, with its `code`), `unknown`, or `not_applied` — an effect that never reached the lease, past which the sequence is advanced first with no effect, so a late copy of it is refused. A lease no longer held here is judged from its record.",
    params: leaseParams,
    body: handoverSchema,
    bodyExample: { sequence: 3 },
    answers: {
      200: { description: 'The lease and what became of the effect.', schema: handoverAnswerSchema },
    },
    refusals: { 404: ['not_found'], 409: ['profile_unavailable'], 422: ['validation_failed'] },
  },
  preview: {
    operationId: 'preview',
    method: 'POST',
    url: `${LEASE}/preview`,
    tag: 'pages',
    summary: 'Preview the target of an act',
    description:
      "The viewport with an element of an observed revision outlined, stored as an artifact of the lease's run (approval cards). Not an effect: no sequence, nothing dispatched; a capture that fails answers no screenshot.",
    params: leaseParams,
    body: previewSchema,
    bodyExample: { args: { revision: 'r_5cx1', element: 'e12' } },
    answers: {
      200: {
        description: 'The lease and the outlined screenshot, if one was had.',
        schema: previewCallAnswerSchema,
      },
    },
    refusals: PAGE_REFUSALS,
  },
  watchLive: {
    operationId: 'watchLive',
    method: 'GET',
    url: `${LEASE}/live`,
    tag: 'person',
    summary: "Watch the lease's page",
    description:
      "A server-sent event stream of the lease's current tab: `event: frame` (`{jpeg, url, tab, width, height}`: a DevTools screencast frame, JPEG, at most 10 a second and only when the page changes; a slow reader gets the newest frame and misses the others), `event: state` (`{person}`: who holds the page, at open and on each change) `event: blocked` (navigations or popups the origin fence refused) and `event: dialog` (`{dialog}`: the current tab's open alert, confirm, prompt or beforeunload dialog — `{type, message, default_value?, url}`, which no frame paints — or `null` once it is answered; at open when one is open, and on each change). The screencast runs only while a stream is open; it follows the tab the lease's calls act on; the stream ends when the lease closes. Frames are never stored.",
    params: leaseParams,
    answers: {
      200: {
        description: 'The stream, until the lease closes or the caller goes.',
        contentType: 'text/event-stream',
      },
    },
    refusals: { 404: ['not_found'], 409: ['lease_expired'] },
  },
  startPersonControl: {
    operationId: 'startPersonControl',
    method: 'POST',
    url: `${LEASE}/person-control`,
    tag: 'person',
    summary: 'A person takes the page',
    description:
      "From now on until `until_ms` (or the end of the control) every page call of the agent on the lease is refused before dispatch, `person_in_control`, and the holder's input goes to the page. Calls already under way finish first; the answer comes once the page is the person's, with the lease's sequence advanced. The same holder asking again renews the control; another holder is refused `person_in_control`.",
    params: leaseParams,
    body: startPersonControlSchema,
    bodyExample: { holder: 'principal:alice', seconds: 900 },
    answers: { 200: { description: 'The control, begun or renewed.', schema: personControlAnswerSchema } },
    refusals: { 404: ['not_found'], 409: ['lease_expired', 'person_in_control'] },
  },
  endPersonControl: {
    operationId: 'endPersonControl',
    method: 'DELETE',
    url: `${LEASE}/person-control`,
    tag: 'person',
    summary: 'The person hands the page back',
    description:
      "Ends the holder's control (also after it ran out by itself): the agent's calls are served again. Answers how long it lasted, how many input events the person sent (never what they were) and the current tab's URL; the sequence advances.",
    params: leaseParams,
    body: endPersonControlSchema,
    bodyExample: { holder: 'principal:alice' },
    answers: { 200: { description: 'The control, ended.', schema: personControlEndAnswerSchema } },
    refusals: { 404: ['not_found'], 409: ['lease_expired', 'person_not_in_control'] },
  },
  personInput: {
    operationId: 'personInput',
    method: 'POST',
    url: `${LEASE}/input`,
    tag: 'person',
    summary: "The holder's input",
    description:
      "Up to 50 key, mouse, wheel and text events of the person holding the page, dispatched in order to the current tab as DevTools input events (never a DevTools command, a file drag or a file chooser); navigations they cause meet the origin fence. A `dialog` event (`{accept, text?}`) answers the open dialog (skipped when none is open); while one is open, the batch's other events after it are dropped. At most 200 events a second per lease (`rate_limited`). The sequence advances once per batch. The contents are never logged or stored.",
    params: leaseParams,
    body: personInputSchema,
    bodyExample: {
      holder: 'principal:alice',
      events: [
        { type: 'mouse', action: 'down', x: 120, y: 48, button: 'left', clicks: 1 },
        { type: 'mouse', action: 'up', x: 120, y: 48, button: 'left', clicks: 1 },
        { type: 'key', action: 'down', key: 'a', code: 'KeyA' },
        { type: 'key', action: 'up', key: 'a', code: 'KeyA' },
      ],
    },
    answers: { 200: { description: 'The batch, dispatched.', schema: personInputAnswerSchema } },
    refusals: { 404: ['not_found'], 409: ['lease_expired', 'person_not_in_control'], 429: ['rate_limited'] },
  },
  getWorker: {
    operationId: 'getWorker',
    method: 'GET',
    url: '/v1/worker',
    tag: 'worker',
    summary: 'Describe this browser worker',
    description: 'Its id, the profiles it serves, its browser, and the browser tools contracts it speaks.',
    answers: { 200: { description: 'This worker.', schema: workerAnswerSchema } },
    refusals: {},
  },
  getDataPlaneDocument: {
    operationId: 'getDataPlaneDocument',
    method: 'GET',
    url: '/docs/json',
    tag: 'worker',
    summary: "The data plane's OpenAPI document",
    description:
      'This document (OpenAPI 3.1), behind the data-plane token like every route but the ops routes.',
    answers: { 200: { description: 'The OpenAPI document.', schema: documentAnswerSchema } },
    refusals: {},
  },
  health: {
    operationId: 'health',
    method: 'GET',
    url: '/healthz',
    tag: 'ops',
    summary: 'Liveness',
    description: 'Answers while the process lives. Public.',
    public: true,
    answers: { 200: { description: 'Alive.', schema: healthAnswerSchema } },
    refusals: {},
  },
  readiness: {
    operationId: 'readiness',
    method: 'GET',
    url: '/readyz',
    tag: 'ops',
    summary: 'Readiness',
    description: 'Whether every check passes (Redis, Chromium). Public; names checks, never a record.',
    public: true,
    answers: {
      200: { description: 'Every check passes.', schema: readinessAnswerSchema },
      503: { description: 'A check failed; the failing ones are named.', schema: readinessAnswerSchema },
    },
    refusals: {},
  },
  metrics: {
    operationId: 'metrics',
    method: 'GET',
    url: '/metrics',
    tag: 'ops',
    summary: 'Prometheus metrics',
    description:
      "The process's metrics in Prometheus text format. Public. In a fleet, where one registry serves every role, only the API serves it and the worker answers 404.",
    public: true,
    answers: { 200: { description: 'The metrics.', contentType: 'text/plain' } },
    refusals: { 404: ['not_found'] },
  },
} as const satisfies Record<string, DataPlaneOperation>;

export type DataPlaneOperationName = keyof typeof DATA_PLANE_OPERATIONS;
