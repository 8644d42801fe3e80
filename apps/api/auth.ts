import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, type ApiKeyIdentity, type ApiKeyScope } from '../../libs/contracts/index.js';
import type { RunStore } from '../../libs/store/index.js';

declare module 'fastify' {
  interface FastifyRequest {
    identity?: ApiKeyIdentity;
  }
}

/** The caller's identity, set by {@link authenticate}; a route that runs without one is a defect. */
export function identityOf(request: FastifyRequest): ApiKeyIdentity {
  if (!request.identity) throw new ApiError('unauthorized', 'an API key is required');
  return request.identity;
}

/**
 * `Authorization: Bearer <key>` → tenant, principal and scopes (DESIGN §3), or 401. The key is
 * looked up by its hash; the key itself is never stored or logged.
 */
export function authenticate(store: RunStore, scope: ApiKeyScope) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const header = request.headers.authorization ?? '';
    const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length).trim() : '';
    const identity = presented ? await store.resolveApiKey(presented) : undefined;
    if (!identity)
      throw new ApiError('unauthorized', 'a valid API key is required (Authorization: Bearer <key>)');
    if (!identity.scopes.includes(scope) && !identity.scopes.includes('admin'))
      throw new ApiError('unauthorized', `this key lacks the ${scope} scope`);
    request.identity = identity;
  };
}
