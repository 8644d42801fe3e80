import type { FastifyInstance } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import {
  ApiError,
  apiKeyViewSchema,
  createApiKeyRequestSchema,
  createdApiKeySchema,
  recordIdSchema,
} from '../../../libs/contracts/index.js';
import type { RunStore } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';

export interface ApiKeyDependencies {
  store: RunStore;
}

const keyIdParams = z.object({ id: recordIdSchema });
const apiKeyListSchema = z.object({ api_keys: z.array(apiKeyViewSchema) });
/** 204: no body. */
const revokedSchema = z.undefined();

/**
 * API key administration (DESIGN §3), behind the `admin` scope: an admin issues, lists and revokes
 * the keys of its own tenant. A key is shown once, in the answer that creates it; another tenant's
 * key id is answered 404.
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
        body: namedBody(createApiKeyRequestSchema, 'CreateApiKey', {
          principal: 'ci-bot',
          scopes: ['runs:write', 'runs:read'],
        }),
        response: answers({ 201: createdApiKeySchema }, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      const { tenant } = identityOf(request);
      const { key, identity } = await store.createApiKey({ tenant, ...request.body });
      return reply.code(201).send({ key, ...identity });
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
