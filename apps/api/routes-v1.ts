import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../libs/config/index.js';
import {
  ApiError,
  type ApiKeyIdentity,
  agentDefinitionSchema,
  boundedJson,
  createProfileSchema,
  grantRequestSchema,
  profileIdSchema,
  RUN_INPUT_MAX_CHARS,
  RUN_SCRIPT_BOUNDS,
  recordIdSchema,
} from '../../libs/contracts/index.js';
import type { ProfileSettings } from '../../libs/lease/index.js';
import {
  microUsdToUsd,
  modelPrice,
  resumeParentOf,
  scriptSchema,
  selectRunLimits,
  worstCaseCallMicroUsd,
} from '../../libs/runtime/index.js';
import {
  AgentVersionCache,
  isEventId,
  type RedisLeaseStore,
  type RunStore,
  SessionCache,
} from '../../libs/store/index.js';
import type { RunEventStreams } from '../../libs/telemetry/index.js';
import { enqueueExecution, type RunsQueue } from '../../queues/index.js';
import { authenticate, identityOf } from './auth.js';
import type { DefaultAgents } from './default-agent.js';

export interface V1Dependencies {
  config: Config;
  store: RunStore;
  profiles: RedisLeaseStore;
  queue: RunsQueue;
  /** The tenants' default agents (ADR-0130 d2). */
  defaultAgents: DefaultAgents;
  /** Open event streams: one subscriber per process, a slot per stream per key (issue 11.10). */
  eventStreams: RunEventStreams;
  /** Ends what a run holds outside Redis when it is cancelled while not running (its lease). */
  releaseRunLease: (runId: string) => Promise<void>;
}

const idParams = z.object({ id: recordIdSchema });
const idempotencyHeader = z.object({
  'idempotency-key': z
    .string()
    .regex(/^[A-Za-z0-9_.:-]{1,128}$/)
    .optional(),
});

export const submitRunSchema = z.strictObject({
  /** What the run is asked to do. */
  input: z.string().min(1).max(RUN_INPUT_MAX_CHARS),
  /** For agents on the `scripted` model: the steps and the final answer; bounded (issue 11.4). */
  script: boundedJson(RUN_SCRIPT_BOUNDS, scriptSchema).optional(),
  /** The run's deadline, from submission. */
  timeout_ms: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .default(3600_000),
});

/** A profile as the REST API shows it to its tenant: settings, never the sealed state. */
function restProfileView(profile: ProfileSettings) {
  return {
    id: profile.id,
    allowed_origins: profile.allowedOrigins,
    frame_origins: profile.frameOrigins,
    subresources: profile.subresources,
    protected: profile.protected,
    sealed: profile.sealedAtMs !== undefined,
  };
}

/** REST v1 (DESIGN §9): profiles, agents, sessions, runs, approvals. Another tenant's record is 404. */
export function registerV1Routes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { store } = deps;
  const agentVersions = new AgentVersionCache(store);
  const sessions = new SessionCache(store);

  app.post(
    '/v1/profiles',
    {
      schema: { tags: ['profiles'], body: createProfileSchema.omit({ tenant: true, principal: true }) },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const profile = createProfileSchema.parse({
        ...request.body,
        tenant: identity.tenant,
        principal: identity.principal,
      });
      if (!(await deps.profiles.createProfile(profile, Date.now())))
        throw new ApiError('conflict', `profile ${profile.id} exists already`);
      return reply.code(201).send({ ...profile, sealed: false });
    },
  );
  app.get(
    '/v1/profiles',
    { schema: { tags: ['profiles'] }, preHandler: authenticate(store, 'runs:read') },
    async (request) => {
      // Issue 11 finding 7: the tenant's own index alone, never another tenant's records or any seal.
      const profiles = await deps.profiles.listProfiles(identityOf(request).tenant);
      return { profiles: profiles.map(restProfileView) };
    },
  );
  app.get(
    '/v1/profiles/:id',
    {
      schema: { tags: ['profiles'], params: z.object({ id: profileIdSchema }) },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      // Ids are unique within a tenant: another tenant's profile of this id is simply not this one.
      const profile = await deps.profiles.profileSettings({
        tenant: identityOf(request).tenant,
        id: request.params.id,
      });
      if (!profile) throw new ApiError('not_found', `profile ${request.params.id} not found`);
      return restProfileView(profile);
    },
  );

  app.post(
    '/v1/agents',
    { schema: { tags: ['agents'], body: agentDefinitionSchema }, preHandler: authenticate(store, 'admin') },
    async (request, reply) => {
      const outcome = await store.putAgent(identityOf(request).tenant, request.body);
      if (outcome.status === 'not_found') throw new ApiError('not_found', 'agent not found');
      return reply
        .code(outcome.status === 'created' ? 201 : 200)
        .send({ ...outcome.agent, version: outcome.version });
    },
  );
  app.put(
    '/v1/agents/:id',
    {
      schema: { tags: ['agents'], params: idParams, body: agentDefinitionSchema },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => {
      const outcome = await store.putAgent(identityOf(request).tenant, request.body, request.params.id);
      if (outcome.status === 'not_found')
        throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return { ...outcome.agent, version: outcome.version };
    },
  );
  app.get(
    '/v1/agents/:id',
    { schema: { tags: ['agents'], params: idParams }, preHandler: authenticate(store, 'runs:read') },
    async (request) => {
      const agent = await store.getAgent(identityOf(request).tenant, request.params.id);
      if (!agent) throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return agent;
    },
  );

  app.get(
    '/v1/models',
    { schema: { tags: ['models'] }, preHandler: authenticate(store, 'runs:read') },
    async () => ({
      default_model: deps.config.models.default_model,
      models: Object.entries(deps.config.models.models).map(([name, entry]) => {
        const price = modelPrice(entry);
        return {
          name,
          provider: entry.provider,
          input_usd_per_mtok: entry.input_usd_per_mtok,
          cached_input_usd_per_mtok: entry.cached_input_usd_per_mtok,
          output_usd_per_mtok: entry.output_usd_per_mtok,
          context_window_tokens: entry.context_window_tokens,
          // ADR-0130 d1: the most one attempt can cost (its window uncached, its output cap, which the
          // adapter always sends); every attempt is checked first, so a run overshoots by this at most.
          worst_case_call_usd: microUsdToUsd(worstCaseCallMicroUsd(price, entry.max_output_tokens)),
        };
      }),
    }),
  );

  app.post(
    '/v1/sessions',
    {
      schema: {
        tags: ['sessions'],
        body: z
          .strictObject({
            /** Omitted: the tenant's default agent (the browser-task budget where browser tools are on). */
            agent_id: recordIdSchema.optional(),
            agent_version: z.string().optional(),
            /** Without `agent_id`: the default agent's variant on this chat model (ops/models.yaml). */
            model: z.string().min(1).max(200).optional(),
            browser_profile_id: z.string().min(1).max(64).optional(),
          })
          .refine((body) => !(body.model && body.agent_id), {
            message: 'model chooses a variant of the default agent; give it without agent_id',
          }),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      if (request.body.browser_profile_id) {
        // The session's profile is the caller's tenant's profile of that id (issue 11 finding 7).
        const profile = await deps.profiles.profileSettings({
          tenant: identity.tenant,
          id: request.body.browser_profile_id,
        });
        if (!profile) throw new ApiError('not_found', `profile ${request.body.browser_profile_id} not found`);
      }
      const agentId =
        request.body.agent_id ?? (await deps.defaultAgents.ensure(identity.tenant, request.body.model));
      const session = await store.createSession({
        tenant: identity.tenant,
        principal: identity.principal,
        agentId,
        ...(request.body.agent_version ? { agentVersion: request.body.agent_version } : {}),
        ...(request.body.browser_profile_id ? { browserProfileId: request.body.browser_profile_id } : {}),
      });
      if (!session) throw new ApiError('not_found', `agent ${agentId} (or that version) not found`);
      return reply.code(201).send(session);
    },
  );
  app.get(
    '/v1/sessions/:id',
    { schema: { tags: ['sessions'], params: idParams }, preHandler: authenticate(store, 'runs:read') },
    async (request) => {
      const session = await store.getSession(identityOf(request).tenant, request.params.id);
      if (!session) throw new ApiError('not_found', `session ${request.params.id} not found`);
      return session;
    },
  );

  app.post(
    '/v1/sessions/:id/runs',
    {
      schema: { tags: ['runs'], params: idParams, headers: idempotencyHeader, body: submitRunSchema },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const idempotencyKey = request.headers['idempotency-key'];
      const session = await sessions.get(identity.tenant, request.params.id);
      if (!session) throw new ApiError('not_found', `session ${request.params.id} not found`);
      const agent = await agentVersions.get(identity.tenant, session.agent_id, session.agent_version);
      if (!agent) throw new ApiError('not_found', `agent version ${session.agent_version} not found`);
      const outcome = await store.submitRun({
        tenant: identity.tenant,
        principal: identity.principal,
        sessionId: request.params.id,
        input: { text: request.body.input, ...(request.body.script ? { script: request.body.script } : {}) },
        limits: selectRunLimits(deps.config.limits, session, agent),
        session,
        timeoutMs: request.body.timeout_ms,
        request: request.body,
        ...(idempotencyKey ? { idempotencyKey } : {}),
      });
      // Enqueued after the record exists; a duplicate submission re-adds the same job id: one job.
      if (outcome.run.status === 'queued') await enqueueExecution(deps.queue, outcome.run);
      return reply.code(outcome.status === 'created' ? 201 : 200).send(outcome.run);
    },
  );

  app.get(
    '/v1/runs/:id',
    { schema: { tags: ['runs'], params: idParams }, preHandler: authenticate(store, 'runs:read') },
    async (request) => {
      const { tenant } = identityOf(request);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const pending = await store.listPendingApprovals(tenant, run.id);
      return { ...run, pending_approvals: pending };
    },
  );

  app.get(
    '/v1/runs/:id/events',
    {
      schema: { tags: ['runs'], params: idParams, querystring: z.object({ after: z.string().optional() }) },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      // Issue 11.5: the resume point is checked before the stream starts, in the one error shape.
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
    { schema: { tags: ['runs'], params: idParams }, preHandler: authenticate(store, 'runs:write') },
    async (request) => {
      const { tenant } = identityOf(request);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const outcome = await cancelRun(deps, tenant, run.id, 'cancelled by request');
      if (!outcome.ok) throw new ApiError('conflict', outcome.message);
      return store.getRun(run.id, tenant);
    },
  );

  app.post(
    '/v1/runs/:id/retry',
    { schema: { tags: ['runs'], params: idParams }, preHandler: authenticate(store, 'runs:write') },
    async (request) => {
      const { tenant } = identityOf(request);
      const outcome = await store.retryRun(tenant, request.params.id);
      if (!outcome.ok)
        throw new ApiError(outcome.code === 'not_found' ? 'not_found' : 'conflict', outcome.message);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      await enqueueExecution(deps.queue, run);
      return run;
    },
  );

  app.get(
    '/v1/approvals',
    {
      schema: { tags: ['approvals'], querystring: z.object({ run_id: recordIdSchema.optional() }) },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => ({
      approvals: await store.listPendingApprovals(identityOf(request).tenant, request.query.run_id),
    }),
  );
  app.post(
    '/v1/approvals/:id/approve',
    {
      schema: {
        tags: ['approvals'],
        params: idParams,
        body: z.strictObject({ grant: grantRequestSchema.optional() }).default({}),
      },
      preHandler: authenticate(store, 'approvals:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const decision = await store.approve(
        identity.tenant,
        request.params.id,
        approvalDecider(identity),
        request.body.grant,
      );
      return answerDecision(deps, identity.tenant, request.params.id, decision);
    },
  );
  app.post(
    '/v1/approvals/:id/deny',
    {
      schema: {
        tags: ['approvals'],
        params: idParams,
        body: z.strictObject({ reason: z.string().min(1).max(2_000) }),
      },
      preHandler: authenticate(store, 'approvals:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const decision = await store.deny(
        identity.tenant,
        request.params.id,
        approvalDecider(identity),
        request.body.reason,
      );
      return answerDecision(deps, identity.tenant, request.params.id, decision);
    },
  );
}

/**
 * Issue 11.11: an approval is decided by its run's own principal, or by a key with `approvals:any`
 * (a tenant `admin` implies it, within its tenant); to anyone else it reads as absent (404).
 */
function approvalDecider(identity: ApiKeyIdentity) {
  const anyPrincipal = identity.scopes.includes('approvals:any') || identity.scopes.includes('admin');
  return { by: identity.principal, ownRunsOnly: !anyPrincipal };
}

/** A decision that re-queued its run adds the run's next execution to the queue. */
async function answerDecision(
  deps: V1Dependencies,
  tenant: string,
  approvalId: string,
  decision: Awaited<ReturnType<RunStore['approve']>>,
) {
  if (!decision.ok) {
    const code =
      decision.code === 'not_found'
        ? 'not_found'
        : decision.code === 'grant_out_of_bounds'
          ? 'validation_failed'
          : 'conflict';
    throw new ApiError(code, decision.message);
  }
  const approval = await deps.store.getApproval(tenant, approvalId);
  if (!approval) throw new ApiError('not_found', `approval ${approvalId} not found`);
  const run = await deps.store.getRun(approval.run_id, tenant);
  if (run?.status === 'queued') await enqueueExecution(deps.queue, run);
  return approval;
}

/**
 * Cancels a run. One that was not running ends now: its page is released in this same request
 * (ADR-0127 d6), the child it waits on is cancelled with it, and a parent waiting on it resumes
 * with its end. A running run is flagged; its worker does the same when it stops.
 */
async function cancelRun(deps: V1Dependencies, tenant: string, runId: string, message: string) {
  const outcome = await deps.store.cancelRun(tenant, runId, message);
  if (!outcome.ok || outcome.detail !== 'cancelled') return outcome;
  await deps.releaseRunLease(runId);
  const child = outcome.run.waiting_on_run_id;
  if (child) await cancelRun(deps, tenant, child, 'its parent run was cancelled');
  await resumeParentOf(
    { store: deps.store, enqueue: (parent) => enqueueExecution(deps.queue, parent) },
    outcome.run,
  );
  return outcome;
}
