import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { OperationLimits } from '../../browser/index.js';
import {
  acquireLeaseSchema,
  actSchema,
  closeLeaseSchema,
  createProfileSchema,
  type LeaseView,
  navigateSchema,
  observeSchema,
  type ProfileRef,
  profileIdSchema,
  renewLeaseSchema,
  tenantIdSchema,
} from '../../contracts/index.js';
import { DataPlaneError, type LeaseService, type LeaseStore, type PageResult } from '../index.js';
import { setDataPlaneErrorAnswers } from './error-answers.js';
import { answerIdempotently } from './idempotency.js';

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
/** Issue 13: a preview names an element of an observed revision, as an act does. */
const previewSchema = z.object({
  deadline_ms: z.number().int().min(1).max(120_000).default(10_000),
  args: z.object({ revision: z.string().min(1).max(64), element: z.string().min(1).max(64) }),
});

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
 * The data-plane routes (DESIGN §5): profiles, and the lease's acquire, renew, close, navigate,
 * observe and act. Acquire, renew and close follow the exact idempotency rule
 * (`answerIdempotently`). Authentication is the server's (`createDataPlaneServer`), not the routes'.
 */
export function registerDataPlaneRoutes(app: FastifyInstance, leases: LeaseService, store: LeaseStore): void {
  setDataPlaneErrorAnswers(app);

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
    return answerIdempotently(store, profile, request, reply, async () => {
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
    return answerIdempotently(store, profile, request, reply, async () => ({
      status: 200,
      body: await leases.renew(profile, params.leaseId, body.requested_expires_at_ms),
    }));
  });
  app.post(`${LEASE}/close`, async (request, reply) => {
    const params = parse(leaseParams, request.params, 'path');
    const profile = profileRef(params);
    const body = parse(closeLeaseSchema, request.body, 'body');
    return answerIdempotently(store, profile, request, reply, async () => ({
      status: 200,
      body: await leases.close(profile, params.leaseId, { seal: body.seal }),
    }));
  });

  // The page routes: each answers the lease (its sequence and effect count), the observation, and
  // the evidence key for the platform's loop breaker (never for the model); navigate and act also
  // what they captured (issue 13: the settled page's screenshot, by artifact name).
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
      return {
        lease,
        observation: result.observation,
        evidence_key: result.evidenceKey ?? null,
        ...(verb === 'observe' ? {} : { artifacts: result.artifacts ?? {} }),
      };
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
  // Issue 13 (approval cards): the target of a pending act outlined. Not an effect: no sequence.
  app.post(`${LEASE}/preview`, async (request) => {
    const params = parse(leaseParams, request.params, 'path');
    const body = parse(previewSchema, request.body ?? {}, 'body');
    return leases.preview(
      profileRef(params),
      params.leaseId,
      body.args,
      limitsFor(request, body.deadline_ms),
    );
  });
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
