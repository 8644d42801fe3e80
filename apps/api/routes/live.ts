import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  type ApiKeyIdentity,
  PERSON_INPUT_BATCH_MAX,
  personInputEventSchema,
  type RunView,
} from '../../../libs/contracts/index.js';
import { sessionIdOf } from '../../../libs/ui/index.js';
import { authenticate, identityOf } from '../auth.js';
import { findLiveLease, type LiveLease, relayInput, relayLive } from '../live-relay.js';
import { type ApiOrigins, sentFromOwnPage } from '../public-origin.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

const inputBodySchema = namedBody(
  z.strictObject({ events: z.array(personInputEventSchema).min(1).max(PERSON_INPUT_BATCH_MAX) }),
  'PersonInput',
  {
    events: [
      { type: 'mouse', action: 'down', x: 120, y: 48, button: 'left', clicks: 1 },
      { type: 'mouse', action: 'up', x: 120, y: 48, button: 'left', clicks: 1 },
      { type: 'text', text: 'hello' },
    ],
  },
);

/** The person holding a page is named on the data plane by the caller's principal. */
export function personHolder(identity: ApiKeyIdentity): string {
  return `principal:${identity.principal}`;
}

/** Whether `identity` may watch `run`'s page: its own principal, or a key with `approvals:any`. */
function mayWatch(identity: ApiKeyIdentity, run: RunView): boolean {
  return (
    identity.principal === run.principal ||
    identity.scopes.includes('approvals:any') ||
    identity.scopes.includes('admin')
  );
}

/**
 * A person on a run's page: its live view (server-sent events relayed from the browser worker) and
 * the input of the person holding it. Behind the session cookie or an API key like every v1 route
 * (another tenant's run, or a run the caller may not watch, is 404); a cookie-opened stream also
 * needs one of the API's own origins, and input the session's CSRF token (the doors check it).
 */
export function registerLiveRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  const runLease = async (
    identity: ApiKeyIdentity,
    runId: string,
  ): Promise<{ run: RunView; live: LiveLease }> => {
    const run = await store.getRun(runId, identity.tenant);
    if (!run || !mayWatch(identity, run)) throw new ApiError('not_found', `run ${runId} not found`);
    const live =
      deps.live && run.browser_profile_id
        ? await findLiveLease(
            deps.live.relay,
            { tenant: run.tenant, id: run.browser_profile_id },
            (scope) => scope.run_id === run.id,
          )
        : undefined;
    if (!live) throw new ApiError('conflict', `run ${runId} holds no live page`);
    return { run, live };
  };

  app.get(
    '/v1/runs/:id/live',
    {
      schema: {
        tags: ['runs'],
        operationId: 'watchRunPage',
        summary: "The run's page, live, as Server-Sent Events",
        description:
          "While the run's lease is live: `event: frame` (`{jpeg, url, tab, width, height}`, a JPEG of the current tab, at most 10 a second, only when the page changes; a slow viewer misses frames), `event: state` (`{person}`: who holds the page), `event: blocked` (navigations the origin fence refused) and `event: dialog` (`{dialog}`: the page's open alert, confirm, prompt or beforeunload — `{type, message, default_value?, url}`, which no frame shows — or `null` once answered). The run's principal or a key with `approvals:any` may watch. Frames are never stored. The stream ends with the lease, or when the key or session is revoked.",
        params: idParams,
        response: {
          200: { description: 'The live view', content: { 'text/event-stream': { schema: z.string() } } },
          ...answers({}, 403, 404, 409, 422),
        },
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      refuseForeignPage(request, deps.live?.origins);
      const { live } = await runLease(identity, request.params.id);
      await relayLive(reply, live, stillAllowed(request, deps));
    },
  );

  app.post(
    '/v1/runs/:id/input',
    {
      schema: {
        tags: ['runs'],
        operationId: 'sendRunPageInput',
        summary: "Input to the run's page, from the person holding it",
        description:
          "Up to 50 key, mouse, wheel and text events, dispatched in order to the page's current tab; a `dialog` event (`{accept, text?}`) answers the page's open dialog. Only the person who took the page over (the run's principal) may send them; anyone else is 409. Contents are never logged or stored.",
        params: idParams,
        body: inputBodySchema,
        response: answers({ 200: z.object({ sequence: z.number().int() }) }, 403, 404, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const identity = identityOf(request);
      const { run, live } = await runLease(identity, request.params.id);
      if (identity.principal !== run.principal)
        throw new ApiError('forbidden', "only the run's own principal may act on its page");
      return relayInput(live, personHolder(identity), request.body.events);
    },
  );
}

/**
 * A stream opened with the session cookie must come from one of the API's own pages: a cookie
 * rides along with a request any site makes the browser send.
 */
export function refuseForeignPage(request: FastifyRequest, origins: ApiOrigins | undefined): void {
  if (!request.uiSession || !origins) return;
  if (!sentFromOwnPage(request.headers, origins))
    throw new ApiError('forbidden', "the live view opens only from the API's own pages");
}

/** Whether the key or session the stream was opened with still stands (read afresh). */
export function stillAllowed(request: FastifyRequest, deps: V1Dependencies): () => Promise<boolean> {
  const keyId = identityOf(request).key_id;
  const sessionId = request.uiSession ? sessionIdOf(request.cookies) : undefined;
  const header = request.headers.authorization ?? '';
  return async () => {
    if (sessionId !== undefined) {
      const session = await deps.live?.sessions?.resolve(sessionId);
      return session?.identity.key_id === keyId;
    }
    const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
    return (await deps.store.resolveApiKey(presented))?.key_id === keyId;
  };
}
