import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { Config } from '../../../libs/config/index.js';
import {
  ApiError,
  apiKeyViewSchema,
  assertNever,
  createApiKeyRequestSchema,
  createdApiKeySchema,
  recordIdSchema,
} from '../../../libs/contracts/index.js';
import type { RunStore } from '../../../libs/store/index.js';
import { errorBody } from '../../../libs/telemetry/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';

export interface ApiKeyDependencies {
  store: RunStore;
  config: Pick<Config, 'api'>;
}

/** Retry-After of a creation past the tenant's bound on keys: a pace, as no place frees by time. */
const KEY_BOUND_RETRY_AFTER_S = 60;

const keyIdParams = z.object({ id: recordIdSchema });
const apiKeyListSchema = z.object({ api_keys: z.array(apiKeyViewSchema) });
/** 204: no body. */
const revokedSchema = z.undefined();

/**
 * API key administration (DESIGN §3), behind the `admin` scope: an admin issues, lists and revokes
 * the keys of its own tenant. A key is shown once, in the answer that creates it; another tenant's
 * key id is answered 404. A key made here records its maker, holds no scope its maker lacks, and
 * counts against the tenant's bound on live keys.
 */
export function registerApiKeyRoutes(root: FastifyInstance, deps: ApiKeyDependencies): void {
  const app = root.withTypeProvider<ZodTypeProvider>();
  const { store } = deps;

  app.post(
    '/v1/api-keys',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'createApiKey',
        summary: "Issue an API key in the caller's tenant; the key is shown only in this answer",
        description:
          'The new key names the key that made it (`created_by`) and holds only scopes that key holds (`admin` holds every tenant scope; 403 otherwise). A tenant holds at most API_KEYS_PER_TENANT live keys (100 by default): past it, 429 `rate_limited` with Retry-After until a key is revoked.',
        body: namedBody(createApiKeyRequestSchema, 'CreateApiKey', {
          principal: 'ci-bot',
          scopes: ['runs:write', 'runs:read'],
        }),
        response: answers({ 201: createdApiKeySchema }, 403, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      const made = await store.createApiKeyBy(
        identityOf(request),
        request.body,
        deps.config.api.apiKeysPerTenant,
      );
      if (made.ok)
        return reply.code(201).send({ key: made.key, ...made.identity, created_by: made.createdBy });
      switch (made.code) {
        case 'tenant_full':
          // A bound on live keys, answered as the API's other bounds are: nothing frees a place
          // but a revocation, so Retry-After only paces a client that tries again.
          return reply
            .code(429)
            .header('retry-after', String(KEY_BOUND_RETRY_AFTER_S))
            .send(
              errorBody(
                'rate_limited',
                `a tenant holds at most ${made.max} API keys (API_KEYS_PER_TENANT); revoke one to make another`,
              ),
            );
        case 'scopes_not_held':
          throw new ApiError(
            'forbidden',
            `this key does not hold ${made.scopes.join(', ')}; a key makes keys only with scopes it holds`,
          );
        case 'chain_too_deep':
          throw new ApiError(
            'forbidden',
            `a key made by this one would be more than ${made.max} keys deep in its creation chain; make it with a key nearer the operator's`,
          );
        case 'maker_gone':
          throw new ApiError('unauthorized', 'this API key was revoked');
        default:
          return assertNever(made);
      }
    },
  );

  app.get(
    '/v1/api-keys',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'listApiKeys',
        summary: "The caller's tenant's keys, oldest first (never a key or its hash)",
        response: answers({ 200: apiKeyListSchema }),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => ({ api_keys: await store.listApiKeys(identityOf(request).tenant) }),
  );

  app.delete(
    '/v1/api-keys/:id',
    {
      schema: {
        tags: ['api-keys'],
        operationId: 'revokeApiKey',
        summary: 'Revoke a key: it answers 401 from then on',
        params: keyIdParams,
        response: answers({ 204: revokedSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      if (!(await store.revokeApiKey(identityOf(request).tenant, request.params.id)))
        throw new ApiError('not_found', `API key ${request.params.id} not found`);
      return reply.code(204).send();
    },
  );
}
