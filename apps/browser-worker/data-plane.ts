import { createHash } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { OperationLimits } from '../../libs/browser/index.js';
import { BrowserToolError } from '../../libs/browser/index.js';
import {
  acquireLeaseSchema,
  actSchema,
  closeLeaseSchema,
  createProfileSchema,
  DATA_PLANE_ERROR_STATUS,
  type DataPlaneErrorCode,
  type LeaseView,
  navigateSchema,
  observeSchema,
  type ProfileRef,
  profileIdSchema,
  renewLeaseSchema,
  tenantIdSchema,
} from '../../libs/contracts/index.js';
import {
  DataPlaneError,
  type LeaseService,
  type LeaseStore,
  type PageResult,
} from '../../libs/lease/index.js';
import { canonicalJson } from '../../libs/store/index.js';
import { errorBody, sendFrameworkError } from '../../libs/telemetry/index.js';

/** How long a request with an Idempotency-Key waits for the first one with the same key to answer. */
const PENDING_WAIT_MS = 10_000;

/**
 * Every profile route names the tenant in its path (issue 11 finding 7): profile ids are unique
 * within a tenant, so `/v1/tenants/a/profiles/shop` and `/v1/tenants/b/profiles/shop` are two profiles.
 */
const TENANT_PROFILES = '/v1/tenants/:tenant/profiles';
const PROFILE = `${TENANT_PROFILES}/:profileId`;
const LEASE = `${PROFILE}/leases/:leaseId`;

const tenantParams = z.object({ tenant: tenantIdSchema });
const profileParams = tenantParams.extend({ profileId: profileIdSchema });
const leaseParams = profileParams.extend({ leaseId: z.string().regex(/^lse_[A-Za-z0-9_-]{8,64}$/) });

function profileRef(params: { tenant: string; profileId: string }): ProfileRef {
  return { tenant: params.tenant, id: params.profileId };
}

function parse<T extends z.ZodType>(schema: T, value: unknown, where: string): z.output<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const field = [where, ...(issue?.path ?? [])].join('.');
  throw new DataPlaneError('validation_failed', `${field}: ${issue?.message ?? 'invalid'}`, { field });
}

/**
 * The data-plane routes (DESIGN §5). Acquire, renew and close follow the exact idempotency rule:
 * the same `Idempotency-Key` with the same body replays the stored answer; with another body it is
 * `idempotency_conflict`. Answers of 5xx are not stored, so a retry really retries.
 */
export function registerDataPlaneRoutes(app: FastifyInstance, leases: LeaseService, store: LeaseStore): void {
  app.setErrorHandler((error: FastifyError | Error, request, reply) => {
    if (error instanceof DataPlaneError)
      return reply.code(error.status).send(errorBody(error.code, error.message, error.details));
    if (error instanceof BrowserToolError) {
      const code = error.code as DataPlaneErrorCode;
      return reply.code(DATA_PLANE_ERROR_STATUS[code] ?? 500).send(errorBody(code, error.message));
    }
    const fastifyError = error as FastifyError;
    if (
      fastifyError.code === 'FST_ERR_CTP_INVALID_JSON_BODY' ||
      fastifyError.code === 'FST_ERR_CTP_EMPTY_JSON_BODY'
    )
      return reply
        .code(422)
        .send(errorBody('validation_failed', 'body: expected a JSON object', { field: 'body' }));
    // Size, content type and anything unexpected: the one shape both servers share (issue 11.9).
    return sendFrameworkError(error, request, reply, app.initialConfig.bodyLimit ?? 65_536);
  });

  app.post(TENANT_PROFILES, async (request, reply) => {
    const { tenant } = parse(tenantParams, request.params, 'path');
    const raw = request.body;
    const named = raw && typeof raw === 'object' && !Array.isArray(raw) ? { tenant, ...raw } : raw;
    const profile = parse(createProfileSchema, named, 'body');
    if (profile.tenant !== tenant)
      throw new DataPlaneError('validation_failed', 'body.tenant: must be the tenant the path names', {
        field: 'body.tenant',
      });
    return reply.code(201).send(await leases.createProfile(profile));
  });
  app.get(TENANT_PROFILES, async (request) => {
    const { tenant } = parse(tenantParams, request.params, 'path');
    return { profiles: await leases.listProfiles(tenant) };
  });
  app.get(PROFILE, async (request) => {
    return leases.getProfile(profileRef(parse(profileParams, request.params, 'path')));
  });

  app.post(`${PROFILE}/leases`, async (request, reply) => {
    const profile = profileRef(parse(profileParams, request.params, 'path'));
    const body = parse(acquireLeaseSchema, request.body, 'body');
    return idempotent(store, profile, request, reply, async () => {
      const answer = await leases.acquire(profile, body);
      return { status: answer.created ? 201 : 200, body: answer };
    });
  });
  app.get(LEASE, async (request) => {
    const params = parse(leaseParams, request.params, 'path');
    return leases.getLease(profileRef(params), params.leaseId);
  });
  app.post(`${LEASE}/renew`, async (request, reply) => {
    const params = parse(leaseParams, request.params, 'path');
    const profile = profileRef(params);
    const body = parse(renewLeaseSchema, request.body, 'body');
    return idempotent(store, profile, request, reply, async () => ({
      status: 200,
      body: await leases.renew(profile, params.leaseId, body.requested_expires_at_ms),
    }));
  });
  app.post(`${LEASE}/close`, async (request, reply) => {
    const params = parse(leaseParams, request.params, 'path');
    const profile = profileRef(params);
    const body = parse(closeLeaseSchema, request.body, 'body');
    return idempotent(store, profile, request, reply, async () => ({
      status: 200,
      body: await leases.close(profile, params.leaseId, { seal: body.seal }),
    }));
  });

  // The page routes: each answers the lease (its sequence and effect count), the observation, and
  // the evidence key for the platform's loop breaker (never for the model).
  const pageRoute = <T extends z.ZodType<{ deadline_ms: number }>>(
    verb: 'navigate' | 'observe' | 'act',
    schema: T,
    call: (
      profile: ProfileRef,
      leaseId: string,
      body: z.output<T>,
      limits: OperationLimits,
    ) => Promise<PageAnswer>,
  ) =>
    app.post(`${LEASE}/${verb}`, async (request) => {
      const params = parse(leaseParams, request.params, 'path');
      const body = parse(schema, request.body ?? {}, 'body');
      const { lease, result } = await call(
        profileRef(params),
        params.leaseId,
        body,
        limitsFor(request, body.deadline_ms),
      );
      return { lease, observation: result.observation, evidence_key: result.evidenceKey ?? null };
    });
  pageRoute('navigate', navigateSchema, (profile, leaseId, body, limits) =>
    leases.navigate(profile, leaseId, body.sequence, body.url, limits),
  );
  pageRoute('observe', observeSchema, (profile, leaseId, body, limits) =>
    leases.observe(profile, leaseId, body.args, limits),
  );
  pageRoute('act', actSchema, (profile, leaseId, body, limits) =>
    leases.act(profile, leaseId, body.sequence, body.args, limits),
  );
}

type PageAnswer = { lease: LeaseView; result: PageResult };

/** The call's deadline, and a signal that aborts when the caller goes away. */
function limitsFor(request: FastifyRequest, deadlineMs: number): OperationLimits {
  const controller = new AbortController();
  request.raw.once('close', () => {
    if (!request.raw.complete) controller.abort();
  });
  return { deadlineMs: Date.now() + deadlineMs, signal: controller.signal };
}

async function idempotent(
  store: LeaseStore,
  profile: ProfileRef,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: () => Promise<{ status: number; body: unknown }>,
): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(key))
    throw new DataPlaneError(
      'validation_failed',
      'Idempotency-Key: a header of 1 to 128 letters, digits, _ . : or -',
      {
        field: 'Idempotency-Key',
      },
    );
  const requestHash = createHash('sha256')
    .update(`${request.method} ${request.url.split('?')[0]}\n${canonicalJson(request.body)}`)
    .digest('hex');

  const deadline = Date.now() + PENDING_WAIT_MS;
  for (;;) {
    const claim = await store.claimIdempotency(profile, key, requestHash);
    if (claim.status === 'conflict')
      throw new DataPlaneError('idempotency_conflict', 'this Idempotency-Key was used with another request');
    if (claim.status === 'replay')
      return reply
        .code(claim.httpStatus)
        .header('idempotent-replayed', 'true')
        .type('application/json')
        .send(claim.body);
    if (claim.status === 'claimed') break;
    if (Date.now() > deadline)
      throw new DataPlaneError(
        'idempotency_in_progress',
        'the first request with this Idempotency-Key is still being answered',
      );
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  let status: number;
  let body: unknown;
  try {
    ({ status, body } = await answer());
  } catch (error) {
    const refusal = error instanceof DataPlaneError && error.status < 500;
    if (!refusal) {
      await store.releaseIdempotency(profile, key);
      throw error;
    }
    status = error.status;
    body = errorBody(error.code, error.message, error.details);
  }
  const text = JSON.stringify(body);
  await store.completeIdempotency(profile, key, status, text);
  return reply.code(status).type('application/json').send(text);
}
