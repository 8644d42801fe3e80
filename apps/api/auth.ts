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

/** The key a request presents: `Bearer <key>`, or a browser's Basic credentials with the key as password. */
function presentedKey(header: string): string {
  if (header.startsWith('Bearer ')) return header.slice('Bearer '.length).trim();
  if (header.startsWith('Basic ')) {
    const decoded = Buffer.from(header.slice('Basic '.length), 'base64').toString('utf8');
    return decoded.slice(decoded.indexOf(':') + 1);
  }
  return '';
}

/** The dashboard's gate: an admin key, or 401 with a Basic challenge a browser answers with a prompt. */
export function dashboardGate(store: RunStore) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const presented = presentedKey(request.headers.authorization ?? '');
    const identity = presented ? await store.resolveApiKey(presented) : undefined;
    if (identity?.scopes.includes('admin')) return;
    await reply
      .code(401)
      .header('www-authenticate', 'Basic realm="Leasehold dashboard"')
      .send({
        error: { code: 'unauthorized', message: 'the dashboard needs an API key with the admin scope' },
      });
  };
}

/**
 * `Authorization: Bearer <key>` → tenant, principal and scopes (DESIGN §3), or 401. The key is
 * looked up by its hash; the key itself is never stored or logged.
 */
export function authenticate(store: RunStore, scope: ApiKeyScope) {
  return async (request: FastifyRequest, _reply: FastifyReply): Promise<void> => {
    const presented = presentedKey(request.headers.authorization ?? '');
    const identity = presented ? await store.resolveApiKey(presented) : undefined;
    if (!identity)
      throw new ApiError('unauthorized', 'a valid API key is required (Authorization: Bearer <key>)');
    if (!identity.scopes.includes(scope) && !identity.scopes.includes('admin'))
      throw new ApiError('unauthorized', `this key lacks the ${scope} scope`);
    request.identity = identity;
  };
}
