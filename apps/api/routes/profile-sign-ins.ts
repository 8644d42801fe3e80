import { randomUUID } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  type ApiKeyIdentity,
  PERSON_INPUT_BATCH_MAX,
  type ProfileRef,
  personInputEventSchema,
  profileIdSchema,
} from '../../../libs/contracts/index.js';
import { DataPlaneClient, type LeaseRef, ProviderError } from '../../../libs/provider/index.js';
import { newSignInId, type ProfileSignInRecord, SIGN_IN_MAX_MS } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { findLiveLease, relayInput, relayLive } from '../live-relay.js';
import { personHolder, refuseForeignPage, stillAllowed } from './live.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { type ProfileSignInDependencies, typed, type V1Dependencies } from './shared.js';

/** How long one data-plane call of a sign-in may take. */
const CALL_MS = 30_000;

const signInParams = z.object({
  id: profileIdSchema,
  signin: z.string().regex(/^signin_[A-Za-z0-9_-]{8,64}$/),
});

const startBodySchema = namedBody(
  z.strictObject({ url: z.string().url().max(2_048) }),
  'StartProfileSignIn',
  {
    url: 'https://shop.example/login',
  },
);

const signInInputSchema = namedBody(
  z.strictObject({ events: z.array(personInputEventSchema).min(1).max(PERSON_INPUT_BATCH_MAX) }),
  'ProfileSignInInput',
  { events: [{ type: 'text', text: 'hello' }] },
);

export const profileSignInViewSchema = z.object({
  signin_id: z.string(),
  profile_id: z.string(),
  status: z.enum(['open', 'done', 'cancelled', 'expired']),
  url: z.string(),
  /** The sign-in page: the live, interactive view of the profile's page. */
  page_url: z.string(),
  created_at_ms: z.number().int(),
  expires_at_ms: z.number().int(),
  ended_at_ms: z.number().int().nullable(),
});

function view(record: ProfileSignInRecord) {
  return {
    signin_id: record.id,
    profile_id: record.profileId,
    status: record.status,
    url: record.url,
    page_url: `/profiles/${encodeURIComponent(record.profileId)}/sign-ins/${record.id}`,
    created_at_ms: record.createdAtMs,
    expires_at_ms: record.expiresAtMs,
    ended_at_ms: record.endedAtMs,
  };
}

/**
 * A profile signed in by its owner (no run, no model, no budget): a lease on the profile for a
 * person alone, its page shown live and held by that person from the start. The sign-in takes the
 * profile's turn, so a run of the profile waits queued behind it; "Done" seals what the person left
 * (never once the lease has expired: ADR-0127 d8), "Cancel" closes it unsealed.
 */
export function registerProfileSignInRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  const needed = (): ProfileSignInDependencies & { token: string } => {
    const signIns = deps.profileSignIns;
    const token = deps.config.secrets.dataPlaneToken;
    if (!signIns || !token) throw new ApiError('conflict', 'browser tools are not configured on this fleet');
    return { ...signIns, token };
  };

  /** The profile, when the caller is an admin of its tenant or its own principal. */
  const ownProfile = async (identity: ApiKeyIdentity, id: string) => {
    const profile = await deps.profiles.getProfile({ tenant: identity.tenant, id });
    if (!profile) throw new ApiError('not_found', `profile ${id} not found`);
    if (!identity.scopes.includes('admin') && identity.principal !== profile.principal)
      throw new ApiError('forbidden', "only an admin or the profile's own principal signs it in");
    return profile;
  };

  /** An open sign-in of the caller's own, with the data plane of the worker that serves it. */
  const ownSignIn = async (identity: ApiKeyIdentity, profileId: string, signInId: string) => {
    const { records, token, workers } = needed();
    const record = await records.get(identity.tenant, signInId);
    if (!record || record.profileId !== profileId || record.principal !== identity.principal)
      throw new ApiError('not_found', `sign-in ${signInId} not found`);
    const profile: ProfileRef = { tenant: identity.tenant, id: profileId };
    const lease = await deps.profiles.getLease(profile, record.leaseId);
    const worker = lease
      ? (await workers.list()).find((candidate) => candidate.id === lease.providerRef)
      : undefined;
    const client = worker ? new DataPlaneClient({ baseUrl: worker.url, token }) : undefined;
    return { record, profile, lease: { profile, leaseId: record.leaseId } as LeaseRef, client };
  };

  /** Ends a sign-in: its lease closed (sealed on "Done"), its turn passed to the next run. */
  const end = async (
    identity: ApiKeyIdentity,
    params: { id: string; signin: string },
    outcome: 'done' | 'cancelled',
  ) => {
    const { records } = needed();
    const { record, profile, lease, client } = await ownSignIn(identity, params.id, params.signin);
    if (record.status !== 'open') {
      // Past its lease's expiry nothing is sealed (ADR-0127 d8); the turn goes on all the same.
      if (record.status === 'expired' && (await records.beginEnd(record.id))) {
        await records.ended(record.id, 'expired');
        await deps.lifecycle.passTurnOf(profile, record.id);
      }
      throw new ApiError('conflict', `sign-in ${record.id} is ${record.status}: nothing was sealed`);
    }
    if (!(await records.beginEnd(record.id)))
      throw new ApiError('conflict', `sign-in ${record.id} has ended already`);
    let ended: 'done' | 'cancelled' | 'expired' = outcome;
    const expired = () => {
      ended = 'expired';
      return new ApiError('conflict', `sign-in ${record.id} expired before it was done: nothing was sealed`);
    };
    try {
      if (!client) throw new ApiError('conflict', "the profile's browser worker is gone: nothing was sealed");
      const limits = { deadlineMs: Date.now() + CALL_MS };
      await client.endPersonControl(lease, { holder: personHolder(identity) }, limits).catch(() => undefined);
      const closed = await client.close(profile, record.leaseId, { seal: outcome === 'done' }, limits);
      if (outcome === 'done') {
        if (closed.close_reason !== 'closed' || !closed.sealed) throw expired();
        await records.noteSignedIn(profile, identity.principal);
      }
    } catch (error) {
      throw error instanceof ProviderError && error.serviceCode === 'lease_expired' ? expired() : error;
    } finally {
      // Only now, its lease closed, may the next run take the page.
      await records.ended(record.id, ended);
      await deps.lifecycle.passTurnOf(profile, record.id);
    }
    return view({ ...record, status: outcome, endedAtMs: Date.now() });
  };

  app.post(
    '/v1/profiles/:id/sign-in',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'startProfileSignIn',
        summary: 'Sign a profile in by hand: its page, live, for a person alone',
        description:
          'Opens a lease on the profile for the caller alone — no run, no model, no budget — navigates its page to `url` (one of the profile\'s allowed origins) and answers the sign-in page: the live view of that page, which the caller holds. While the page is open it beats (`/heartbeat`); "Done" seals what the person left, "Cancel" closes it unsealed; a sign-in left past its lease\'s expiry never seals. Runs of the profile wait queued behind it. An admin or the profile\'s own principal only.',
        params: z.object({ id: profileIdSchema }),
        body: startBodySchema,
        response: answers({ 201: profileSignInViewSchema }, 403, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const { records, turns, workers, token, leaseMs } = needed();
      const stored = await ownProfile(identity, request.params.id);
      const url = new URL(request.body.url);
      if (!stored.allowedOrigins.includes(url.origin))
        throw new ApiError('validation_failed', `${url.origin} is not one of the profile's allowed origins`);
      const profile: ProfileRef = { tenant: identity.tenant, id: stored.id };
      const worker = await workers.findForProfile(profile);
      if (!worker) throw new ApiError('unavailable', 'no browser worker serves this profile; try again');
      const signInId = newSignInId();
      const now = Date.now();
      await records.begin({
        id: signInId,
        tenant: identity.tenant,
        profileId: stored.id,
        principal: identity.principal,
        url: url.href,
        createdAtMs: now,
        openUntilMs: now + CALL_MS,
      });
      const turn = await turns.takeForSignIn(profile, signInId);
      if (!turn.turn) {
        await turns.pass(profile, signInId);
        await records.discard(signInId);
        throw new ApiError(
          'conflict',
          `profile ${stored.id} is in use by run ${turn.holderRunId}; try again after it`,
        );
      }
      const client = new DataPlaneClient({ baseUrl: worker.url, token });
      const limits = { deadlineMs: now + CALL_MS };
      let leaseId: string | undefined;
      try {
        const acquired = await client.acquire(
          profile,
          {
            tenant: identity.tenant,
            principal: identity.principal,
            run_id: signInId,
            attempt: 1,
            requested_expires_at_ms: now + leaseMs,
          },
          `signin-${signInId}-${randomUUID()}`,
          limits,
        );
        leaseId = acquired.lease.lease_id;
        const lease = { profile, leaseId };
        await client.navigate(profile, leaseId, 1, url.href, limits);
        await client.startPersonControl(
          lease,
          { holder: personHolder(identity), seconds: Math.ceil(SIGN_IN_MAX_MS / 1000) },
          limits,
        );
        await records.opened(signInId, leaseId, acquired.lease.expires_at_ms);
        const created = await records.get(identity.tenant, signInId);
        if (!created) throw new ApiError('unavailable', 'the sign-in could not be recorded; try again');
        return reply.code(201).send(view(created));
      } catch (error) {
        if (leaseId) await client.close(profile, leaseId, { seal: false }, limits).catch(() => undefined);
        await records.discard(signInId);
        await deps.lifecycle.passTurnOf(profile, signInId);
        if (error instanceof ProviderError && error.serviceCode === 'profile_unavailable')
          throw new ApiError('conflict', `profile ${stored.id} is in use by a run; try again after it`);
        // The page took longer to open than the sign-in's first lease lasts: nothing was kept.
        if (error instanceof ProviderError && error.serviceCode === 'lease_expired')
          throw new ApiError(
            'unavailable',
            'the sign-in page did not open before its lease ended; try again',
          );
        throw error;
      }
    },
  );

  app.get(
    '/v1/profiles/:id/sign-ins/:signin',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'getProfileSignIn',
        summary: 'A sign-in of a profile',
        params: signInParams,
        response: answers({ 200: profileSignInViewSchema }, 404),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { record } = await ownSignIn(identityOf(request), request.params.id, request.params.signin);
      return view(record);
    },
  );

  app.post(
    '/v1/profiles/:id/sign-ins/:signin/heartbeat',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'beatProfileSignIn',
        summary: "Keeps a sign-in's page while it is open",
        description:
          'The sign-in page beats every 30 s (three times a lease when PROFILE_SIGN_IN_LEASE_MS is shorter than 90 s): its lease is renewed to PROFILE_SIGN_IN_LEASE_MS from now, never past 60 minutes from the start. A sign-in that stopped beating expires and never seals.',
        params: signInParams,
        response: answers({ 200: profileSignInViewSchema }, 404, 409),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { records, leaseMs } = needed();
      const { record, profile, client } = await ownSignIn(
        identityOf(request),
        request.params.id,
        request.params.signin,
      );
      if (record.status !== 'open' || !client)
        throw new ApiError(
          'conflict',
          `sign-in ${record.id} is ${record.status === 'open' ? 'gone' : record.status}`,
        );
      const target = Math.min(Date.now() + leaseMs, record.createdAtMs + SIGN_IN_MAX_MS);
      const renewed = await client.renew(profile, record.leaseId, target, {
        deadlineMs: Date.now() + CALL_MS,
      });
      await records.extend(record.id, renewed.expires_at_ms);
      return view({ ...record, expiresAtMs: renewed.expires_at_ms });
    },
  );

  app.get(
    '/v1/profiles/:id/sign-ins/:signin/live',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'watchProfileSignIn',
        summary: "A sign-in's page, live, as Server-Sent Events",
        description:
          "The same events as a run's live view (`frame`, `state`, `blocked`, `dialog`). Frames are never stored.",
        params: signInParams,
        response: {
          200: { description: 'The live view', content: { 'text/event-stream': { schema: z.string() } } },
          ...answers({}, 403, 404, 409),
        },
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      refuseForeignPage(request, deps.live?.origins);
      const { record, profile } = await ownSignIn(identity, request.params.id, request.params.signin);
      const live = deps.live
        ? await findLiveLease(deps.live.relay, profile, (scope) => scope.run_id === record.id)
        : undefined;
      if (!live) throw new ApiError('conflict', `sign-in ${record.id} holds no live page`);
      await relayLive(reply, live, stillAllowed(request, deps));
    },
  );

  app.post(
    '/v1/profiles/:id/sign-ins/:signin/input',
    {
      schema: {
        tags: ['profiles'],
        operationId: 'sendProfileSignInInput',
        summary: "Input to a sign-in's page",
        description:
          'Up to 50 key, mouse, wheel and text events from the person signing in, and `dialog` answers to the page’s open dialog. Contents are never logged or stored.',
        params: signInParams,
        body: signInInputSchema,
        response: answers({ 200: z.object({ sequence: z.number().int() }) }, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const { record, client, lease } = await ownSignIn(identity, request.params.id, request.params.signin);
      if (record.status !== 'open' || !client)
        throw new ApiError('conflict', `sign-in ${record.id} is ${record.status}`);
      return relayInput({ lease, client }, personHolder(identity), request.body.events);
    },
  );

  for (const [outcome, path, summary] of [
    ['done', 'done', 'Done: the profile is sealed as the person left it'],
    ['cancelled', 'cancel', 'Cancel: the lease closes unsealed'],
  ] as const)
    app.post(
      `/v1/profiles/:id/sign-ins/:signin/${path}`,
      {
        schema: {
          tags: ['profiles'],
          operationId: outcome === 'done' ? 'finishProfileSignIn' : 'cancelProfileSignIn',
          summary,
          params: signInParams,
          response: answers({ 200: profileSignInViewSchema }, 404, 409),
        },
        preHandler: authenticate(store, 'runs:write'),
      },
      async (request) => end(identityOf(request), request.params, outcome),
    );
}
