import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { OperationLimits } from '../../browser/index.js';
import type { LeaseView, ProfileRef } from '../../contracts/index.js';
import { type EgressGuard, refusedProfileOrigin } from '../../egress/index.js';
import { DataPlaneError, type LeaseService, type LeaseStore, type PageResult } from '../index.js';
import { setDataPlaneErrorAnswers } from './error-answers.js';
import { answerIdempotently } from './idempotency.js';
import { registerPersonRoutes } from './person-routes.js';
import { registerRenewalsRoute } from './renewals.js';
import { registerOperation } from './route-registration.js';
import {
  leaseParams,
  DATA_PLANE_OPERATIONS as OPERATIONS,
  profileParams,
  tenantParams,
} from './route-table.js';

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
 * The data-plane routes (DESIGN §5): profiles, and the lease's acquire, renew (alone, or many at
 * once), close, navigate, observe and act. Acquire, renew and close follow the exact idempotency rule
 * (`answerIdempotently`). Authentication is the server's (`createDataPlaneServer`), not the routes'.
 * Each registers as its entry of the route table: the table gives the method and path,
 * and the schemas its answers are serialized through and documented by.
 */
export function registerDataPlaneRoutes(
  app: FastifyInstance,
  leases: LeaseService,
  store: LeaseStore,
  egress?: EgressGuard,
): void {
  setDataPlaneErrorAnswers(app);

  registerOperation(app, OPERATIONS.createProfile, async (request, reply) => {
    const { tenant } = parse(tenantParams, request.params, 'path');
    const raw = request.body;
    const named = raw && typeof raw === 'object' && !Array.isArray(raw) ? { tenant, ...raw } : raw;
    const profile = parse(OPERATIONS.createProfile.body, named, 'body');
    if (profile.tenant !== tenant)
      throw new DataPlaneError('validation_failed', 'body.tenant: must be the tenant the path names', {
        field: 'body.tenant',
      });
    // DESIGN §12: an origin that is a refused address in any spelling, or a localhost name, is
    // refused now; other names are judged by the egress proxy at each connection.
    const refused =
      egress &&
      refusedProfileOrigin(
        { allowed_origins: profile.allowed_origins, frame_origins: profile.frame_origins },
        egress,
      );
    if (refused)
      throw new DataPlaneError('validation_failed', `body.${refused.message}`, {
        field: `body.${refused.field}`,
      });
    return reply.code(201).send(await leases.createProfile(profile));
  });
  registerOperation(app, OPERATIONS.listProfiles, async (request) => {
    const { tenant } = parse(tenantParams, request.params, 'path');
    return { profiles: await leases.listProfiles(tenant) };
  });
  registerOperation(app, OPERATIONS.getProfile, async (request) => {
    return leases.getProfile(profileRef(parse(profileParams, request.params, 'path')));
  });

  registerOperation(app, OPERATIONS.acquireLease, async (request, reply) => {
    const profile = profileRef(parse(profileParams, request.params, 'path'));
    const body = parse(OPERATIONS.acquireLease.body, request.body, 'body');
    // The key is claimed in the acquire script itself, one round trip fewer.
    return answerIdempotently(
      store,
      profile,
      request,
      reply,
      async (ticket) => {
        const answer = await leases.acquire(profile, body, ticket);
        if ('claim' in answer) return answer;
        return { status: answer.created ? 201 : 200, body: answer };
      },
      { claimsItself: true },
    );
  });
  registerOperation(app, OPERATIONS.getLease, async (request) => {
    const params = parse(leaseParams, request.params, 'path');
    return leases.getLease(profileRef(params), params.leaseId);
  });
  registerOperation(app, OPERATIONS.renewLease, async (request, reply) => {
    const params = parse(leaseParams, request.params, 'path');
    const profile = profileRef(params);
    const body = parse(OPERATIONS.renewLease.body, request.body, 'body');
    // The key is claimed in the renew script itself, as each renewal of a batch claims its
    // own: one path for both, and two round trips (the script, the answer stored) where it took four.
    return answerIdempotently(
      store,
      profile,
      request,
      reply,
      async (ticket) => {
        const answer = await leases.renew(profile, params.leaseId, body.requested_expires_at_ms, ticket);
        return 'claim' in answer ? answer : { status: 200, body: answer };
      },
      { claimsItself: true },
    );
  });
  registerRenewalsRoute(app, leases, store, parse);
  registerPersonRoutes(app, leases, parse);
  registerOperation(app, OPERATIONS.closeLease, async (request, reply) => {
    const params = parse(leaseParams, request.params, 'path');
    const profile = profileRef(params);
    const body = parse(OPERATIONS.closeLease.body, request.body, 'body');
    return answerIdempotently(store, profile, request, reply, async () => ({
      status: 200,
      body: await leases.close(profile, params.leaseId, { seal: body.seal }),
    }));
  });

  // The page routes: each answers the lease (its sequence and effect count), the observation, and
  // the evidence key for the platform's loop breaker (never for the model); navigate and act also
  // what they captured (the settled page's screenshot, by artifact name).
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
    registerOperation(app, OPERATIONS[verb], async (request) => {
      const params = parse(leaseParams, request.params, 'path');
      const body = parse(schema, request.body ?? {}, 'body');
      // An effect runs to its own deadline once it arrived, though its caller goes away (a run
      // worker stopping): the run's next owner learns its end from the lease (`handover`).
      const { lease, result } = await call(
        profileRef(params),
        params.leaseId,
        body,
        limitsFor(request, body.deadline_ms, { outlivesCaller: verb !== 'observe' }),
      );
      return {
        lease,
        observation: result.observation,
        evidence_key: result.evidenceKey ?? null,
        ...(verb === 'observe' ? {} : { artifacts: result.artifacts ?? {} }),
      };
    });
  pageRoute('navigate', OPERATIONS.navigate.body, (profile, leaseId, body, limits) =>
    leases.navigate(profile, leaseId, body.sequence, body.url, limits),
  );
  pageRoute('observe', OPERATIONS.observe.body, (profile, leaseId, body, limits) =>
    leases.observe(profile, leaseId, body.args, limits),
  );
  pageRoute('act', OPERATIONS.act.body, (profile, leaseId, body, limits) =>
    leases.act(profile, leaseId, body.sequence, body.args, limits),
  );
  registerOperation(app, OPERATIONS.handover, async (request) => {
    const params = parse(leaseParams, request.params, 'path');
    const body = parse(OPERATIONS.handover.body, request.body ?? {}, 'body');
    return leases.handover(profileRef(params), params.leaseId, body.sequence);
  });
  // The target of a pending act outlined. Not an effect: no sequence.
  registerOperation(app, OPERATIONS.preview, async (request) => {
    const params = parse(leaseParams, request.params, 'path');
    const body = parse(OPERATIONS.preview.body, request.body ?? {}, 'body');
    return leases.preview(
      profileRef(params),
      params.leaseId,
      body.args,
      limitsFor(request, body.deadline_ms),
      body.screenshot,
    );
  });
}

type PageAnswer = { lease: LeaseView; result: PageResult };

/** The call's deadline, and a signal that aborts when the caller goes away (unless it outlives it). */
function limitsFor(
  request: FastifyRequest,
  deadlineMs: number,
  { outlivesCaller = false }: { outlivesCaller?: boolean } = {},
): OperationLimits {
  const controller = new AbortController();
  if (!outlivesCaller)
    request.raw.once('close', () => {
      if (!request.raw.complete) controller.abort();
    });
  return { deadlineMs: Date.now() + deadlineMs, signal: controller.signal };
}
