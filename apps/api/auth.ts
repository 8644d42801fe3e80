import type { FastifyReply, FastifyRequest, RouteOptions } from 'fastify';
import { ApiError, type ApiKeyIdentity, type ApiKeyScope } from '../../libs/contracts/index.js';
import { csrfTokenMatches, type RunStore, type UiSession, type UiSessions } from '../../libs/store/index.js';
import { type DoorKeeper, type FailedAuthLimiter, refuseCredential } from '../../libs/telemetry/index.js';
import { CSRF_HEADER, changesState, sessionIdOf } from '../../libs/ui/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    identity?: ApiKeyIdentity;
    /** Set when the request was let in by a run-page session cookie instead of a key. */
    uiSession?: UiSession;
  }
}

/** The caller's identity, set by {@link authenticate}; a route that runs without one is a defect. */
export function identityOf(request: FastifyRequest): ApiKeyIdentity {
  if (!request.identity) throw new ApiError('unauthorized', 'an API key is required');
  return request.identity;
}

/** The key a request presents: `Bearer <key>`, or a browser's Basic credentials with the key as password. */
function presentedKey(header: string): string {
  if (header.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  if (header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
    return decoded.slice(decoded.indexOf(':') + 1);
  }
  return '';
}

/**
 * The dashboard's gate: a fleet operator key (the board shows every tenant's jobs, so
 * no tenant key opens it, admin included), or 401 with a Basic challenge a browser answers with a
 * prompt.
 */
export function dashboardGate(store: RunStore, failures: FailedAuthLimiter) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const presented = presentedKey(request.headers.authorization ?? '');
    const identity = presented ? await store.resolveApiKey(presented) : undefined;
    if (identity?.scopes.includes('operator')) return;
    const refusal = {
      refusal: 'the dashboard needs a fleet operator key (npm run api-key -- --operator)',
      challenge: 'Basic realm="Leasehold dashboard"',
    };
    // A missing or wrong key counts against its address as at every door; a
    // right key without the scope is no failed authentication.
    if (!identity) return refuseCredential(request, reply, failures, refusal);
    await reply
      .code(401)
      .header('www-authenticate', refusal.challenge)
      .send({ error: { code: 'unauthorized', message: refusal.refusal } });
  };
}

const API_KEY_REFUSAL = 'a valid API key is required (Authorization: Bearer <key>)';

/** The guards {@link authenticate} made: a route carrying one names its scope (checked at start-up). */
const scopeGuards = new WeakSet<object>();

/**
 * `Authorization: Bearer <key>` → tenant, principal and scopes (DESIGN §3), or 401. The key is
 * looked up by its hash; the key itself is never stored or logged. Behind {@link apiKeyDoors} the
 * identity is already resolved, and this checks the route's scope.
 */
export function authenticate(store: RunStore, scope: ApiKeyScope) {
  const guard = async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const presented = request.identity ? '' : presentedKey(request.headers.authorization ?? '');
    const identity = request.identity ?? (presented ? await store.resolveApiKey(presented) : undefined);
    if (!identity) throw new ApiError('unauthorized', API_KEY_REFUSAL);
    if (!identity.scopes.includes(scope) && !identity.scopes.includes('admin'))
      throw new ApiError('unauthorized', `this key lacks the ${scope} scope`);
    request.identity = identity;
  };
  scopeGuards.add(guard);
  return guard;
}

/** True when a route runs an {@link authenticate} guard before its handler. */
function checksScope(route: RouteOptions): boolean {
  return [route.onRequest, route.preValidation, route.preHandler]
    .flat()
    .some((hook) => typeof hook === 'function' && scopeGuards.has(hook));
}

/**
 * The API's default-deny layer: every route not marked public or `own` needs a
 * valid key before anything else runs — unknown paths and router errors included — and every
 * such route must name its scope with {@link authenticate}, or the API does not start.
 */
export function apiKeyDoors(store: RunStore, failures: FailedAuthLimiter, sessions?: UiSessions): DoorKeeper {
  return {
    refusal: API_KEY_REFUSAL,
    challenge: 'Bearer',
    failures,
    async verify(request) {
      if (sessions && request.headers.authorization === undefined) return admitSession(request, sessions);
      const presented = presentedKey(request.headers.authorization ?? '');
      const identity = presented ? await store.resolveApiKey(presented) : undefined;
      if (!identity) return false;
      request.identity = identity;
      return true;
    },
    routeGuarded: checksScope,
  };
}

/**
 * A run page's script calls the same /v1 routes with the session cookie instead of a key,
 * as the key's identity, read afresh (a revoked key is refused). A state-changing call needs the
 * session's CSRF token in `X-CSRF-Token` as well: a cookie rides along with any request another
 * page makes the browser send, the token only with ours. Refused without it, whatever the route.
 */
async function admitSession(request: FastifyRequest, sessions: UiSessions): Promise<boolean> {
  // The doors' hook is the server's first, ahead of @fastify/cookie's: parse with its parser here.
  const sessionId = sessionIdOf(request.cookies ?? request.server.parseCookie(request.headers.cookie ?? ''));
  const session = sessionId ? await sessions.resolve(sessionId) : undefined;
  if (!session) return false;
  const header = request.headers[CSRF_HEADER];
  const presented = typeof header === 'string' ? header : undefined;
  if (changesState(request.method) && !csrfTokenMatches(session, presented))
    throw new ApiError('unauthorized', 'a change made from a signed-in page must carry its X-CSRF-Token');
  request.identity = session.identity;
  request.uiSession = session;
  return true;
}
