import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  boundedJson,
  fileIdSchema,
  outputSchemaSchema,
  RUN_INPUT_FILES_MAX,
  RUN_INPUT_MAX_CHARS,
  RUN_SCRIPT_BOUNDS,
  runSecretsSchema,
  runViewSchema,
} from '../../../libs/contracts/index.js';
import { runDetailSchema, runEventStreamSchema } from '../../../libs/contracts/rest-views.js';
import { scriptSchema } from '../../../libs/models/index.js';
import { selectRunLimits } from '../../../libs/runtime/index.js';
import { AgentVersionCache, isEventId } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { sealedSubmission } from './run-secrets.js';
import { idempotencyHeader, idParams, typed, type V1Dependencies } from './shared.js';

export const submitRunSchema = z.strictObject({
  /** What the run is asked to do. */
  input: z.string().min(1).max(RUN_INPUT_MAX_CHARS),
  /** For agents on the `scripted` model: the steps and the final answer; bounded. */
  script: boundedJson(RUN_SCRIPT_BOUNDS, scriptSchema).optional(),
  /** The run's deadline, from submission. */
  timeout_ms: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .default(3600_000),
  /**
   * Secrets by name (at most 16, each value at most 1 KiB): the model is told their names and
   * origins and types `{{secret:NAME}}` in a fill; the browser worker puts the value in, only into
   * a password, one-time-code, username or email field of the secret's origins. Sealed at rest and
   * never returned by any read.
   */
  secrets: runSecretsSchema.optional(),
  /**
   * The JSON Schema the final answer must take (the session's when omitted); the validated value is
   * `result.output`. An answer that does not validate gets one correction turn, then `invalid_output`.
   */
  output_schema: outputSchemaSchema.optional(),
  /**
   * Uploaded files (`POST /v1/files`, at most 16) the run's `upload` acts may set a file input to;
   * each must be the tenant's (404 otherwise). A file listed here expires with the run, not before.
   */
  files: z.array(fileIdSchema).max(RUN_INPUT_FILES_MAX).optional(),
});
namedBody(submitRunSchema, 'SubmitRun', { input: 'Find the opening hours on the page', timeout_ms: 600_000 });

/** Runs (DESIGN §4): submitted to a session, read, streamed, cancelled and retried. */
export function registerRunRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store, lifecycle } = deps;
  const agentVersions = new AgentVersionCache(store);

  app.post(
    '/v1/sessions/:id/runs',
    {
      schema: {
        tags: ['runs'],
        operationId: 'submitRun',
        summary: 'Submit a run to a session',
        description:
          'Answers 201 with the queued run. With an Idempotency-Key, a repeat of the same submission answers 200 with the run it made; the same key with another body is 409 idempotency_conflict.',
        params: idParams,
        headers: idempotencyHeader,
        body: submitRunSchema,
        response: answers({ 200: runViewSchema, 201: runViewSchema }, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const idempotencyKey = request.headers['idempotency-key'];
      // Read each time, not cached: a session may be deleted.
      const session = await store.getSession(identity.tenant, request.params.id);
      if (!session) throw new ApiError('not_found', `session ${request.params.id} not found`);
      const agent = await agentVersions.get(identity.tenant, session.agent_id, session.agent_version);
      if (!agent) throw new ApiError('not_found', `agent version ${session.agent_version} not found`);
      const { secrets, hashed } = sealedSubmission(deps.config, identity.tenant, request.body);
      const outputSchema = request.body.output_schema ?? session.output_schema ?? undefined;
      const outcome = await store.submitRun({
        tenant: identity.tenant,
        principal: identity.principal,
        sessionId: request.params.id,
        input: {
          text: request.body.input,
          ...(request.body.script ? { script: request.body.script } : {}),
          ...(outputSchema ? { output_schema: outputSchema } : {}),
          ...(request.body.files?.length ? { files: request.body.files } : {}),
        },
        ...(request.body.files?.length ? { files: request.body.files } : {}),
        limits: selectRunLimits(deps.config.limits, session, agent),
        session,
        timeoutMs: request.body.timeout_ms,
        request: hashed,
        ...(secrets ? { secrets } : {}),
        ...(idempotencyKey ? { idempotencyKey } : {}),
        ...(deps.addFirstJob ? { enqueueWith: deps.addFirstJob } : {}),
      });
      // Enqueued after the record exists (with it, in one round trip, where the store could); a
      // duplicate submission re-adds the same job id: one job.
      if (outcome.run.status === 'queued' && !outcome.enqueued) await lifecycle.followUp(outcome.run);
      return reply.code(outcome.status === 'created' ? 201 : 200).send(outcome.run);
    },
  );

  app.get(
    '/v1/runs/:id',
    {
      schema: {
        tags: ['runs'],
        operationId: 'getRun',
        summary: 'A run, with the approvals it waits on',
        params: idParams,
        response: answers({ 200: runDetailSchema }, 404, 409, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      // The run and its approvals of one moment: never `running` with an approval pending.
      const detail = await store.getRunDetail(request.params.id, tenant);
      if (!detail) throw new ApiError('not_found', `run ${request.params.id} not found`);
      return { ...detail.run, pending_approvals: detail.pendingApprovals };
    },
  );

  app.get(
    '/v1/runs/:id/events',
    {
      schema: {
        tags: ['runs'],
        operationId: 'streamRunEvents',
        summary: "The run's events as Server-Sent Events",
        description:
          'Replays the events after `after` (or the Last-Event-ID header), then streams new ones until the run ends. At most a few open streams per key (429 past them).',
        params: idParams,
        querystring: z.object({ after: z.string().optional() }),
        response: {
          200: {
            description: 'The event stream',
            content: { 'text/event-stream': { schema: runEventStreamSchema } },
          },
          ...answers({}, 400, 404, 409, 422),
        },
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      // The resume point is checked before the stream starts, in the one error shape.
      const lastEventId = request.headers['last-event-id'];
      const after = request.query.after ?? (typeof lastEventId === 'string' ? lastEventId : undefined);
      if (after !== undefined && !isEventId(after))
        throw new ApiError(
          'bad_request',
          `after/Last-Event-ID: an event id such as 1700000000000-0, got "${after.slice(0, 64)}"`,
        );
      const run = await store.getRun(request.params.id, identity.tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      await deps.eventStreams.serve(reply, run, after, identity.key_id);
    },
  );

  app.post(
    '/v1/runs/:id/cancel',
    {
      schema: {
        tags: ['runs'],
        operationId: 'cancelRun',
        summary: 'Cancel a run',
        description:
          'A run not yet running ends `cancelled` now; a running one is asked to stop (`cancel_requested`) and ends at its next step. An ended run is 409. Takes no body.',
        params: idParams,
        response: answers({ 200: runViewSchema }, 400, 404, 409, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      // DESIGN §4.7: a run that was not running ends now, its consequences in this same request
      // (its page released, ADR-0127 d6; its child cancelled; a waiting parent resumed).
      const outcome = await lifecycle.cancel(tenant, run.id, 'cancelled by request');
      if (!outcome.ok) throw new ApiError('conflict', outcome.message);
      const cancelled = await store.getRun(run.id, tenant);
      if (!cancelled) throw new ApiError('not_found', `run ${request.params.id} not found`);
      return cancelled;
    },
  );

  app.post(
    '/v1/runs/:id/retry',
    {
      schema: {
        tags: ['runs'],
        operationId: 'retryRun',
        summary: 'Retry a failed run',
        description:
          'Queues a new attempt of a `failed` run, which starts clean (told what earlier attempts did). Any other status is 409. Takes no body.',
        params: idParams,
        response: answers({ 200: runViewSchema }, 400, 404, 409, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const outcome = await store.retryRun(tenant, request.params.id);
      if (!outcome.ok)
        throw new ApiError(outcome.code === 'not_found' ? 'not_found' : 'conflict', outcome.message);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      await lifecycle.followUp(run);
      return run;
    },
  );
}
