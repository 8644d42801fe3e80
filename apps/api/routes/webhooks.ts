import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  createdWebhookSchema,
  createWebhookRequestSchema,
  WEBHOOKS_PER_TENANT_MAX,
  webhookDeliveryPageSchema,
} from '../../../libs/contracts/index.js';
import { webhookListSchema } from '../../../libs/contracts/rest-views.js';
import type { EgressGuard } from '../../../libs/egress/index.js';
import { checkWebhookUrl, WebhookAddressRefused, webhookGuard } from '../../../libs/webhooks/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

/**
 * Webhooks, behind the `admin` scope like API keys: an admin registers, lists and
 * deletes its tenant's webhooks and reads each one's delivery log. The secret is shown once, in
 * the answer that creates it; another tenant's webhook is answered 404.
 */
export function registerWebhookRoutes(
  root: FastifyInstance,
  deps: Pick<V1Dependencies, 'config' | 'store' | 'webhooks'>,
): void {
  const app = typed(root);
  const { store, webhooks } = deps;
  // DESIGN §12: the one address guard; the fleet's own ports refused even where private ones are
  // allowed. Made at the first registration: documenting the routes runs none of their code.
  let guard: EgressGuard | undefined;
  const guardOf = () => {
    guard ??= webhookGuard(deps.config.webhooks.allowPrivate, deps.config.egress.ownPorts);
    return guard;
  };

  app.post(
    '/v1/webhooks',
    {
      schema: {
        tags: ['webhooks'],
        operationId: 'createWebhook',
        summary:
          "Register a webhook in the caller's tenant for approval.requested and run.ended; the secret is shown only in this answer",
        body: namedBody(createWebhookRequestSchema, 'CreateWebhook', {
          url: 'https://hooks.example/leasehold',
          events: ['run.ended'],
        }),
        response: answers({ 201: createdWebhookSchema }, 409, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      const { tenant } = identityOf(request);
      const url = await checkWebhookUrl(request.body.url, guardOf()).catch((error: unknown) => {
        if (error instanceof WebhookAddressRefused)
          throw new ApiError('validation_failed', `url: ${error.message}`);
        throw error;
      });
      const created = await webhooks.create({ ...request.body, tenant, url });
      if (!created)
        throw new ApiError('conflict', `a tenant holds at most ${WEBHOOKS_PER_TENANT_MAX} webhooks`);
      return reply.code(201).send(created);
    },
  );

  app.get(
    '/v1/webhooks',
    {
      schema: {
        tags: ['webhooks'],
        operationId: 'listWebhooks',
        summary: "The caller's tenant's webhooks, oldest first (never a secret)",
        response: answers({ 200: webhookListSchema }),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => ({ webhooks: await webhooks.list(identityOf(request).tenant) }),
  );

  app.delete(
    '/v1/webhooks/:id',
    {
      schema: {
        tags: ['webhooks'],
        operationId: 'deleteWebhook',
        summary: 'Delete a webhook and its delivery log: deliveries not yet made are dropped',
        params: idParams,
        response: answers({ 204: z.undefined() }, 404, 422),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request, reply) => {
      if (!(await webhooks.delete(identityOf(request).tenant, request.params.id)))
        throw new ApiError('not_found', `webhook ${request.params.id} not found`);
      return reply.code(204).send();
    },
  );

  app.get(
    '/v1/webhooks/:id/deliveries',
    {
      schema: {
        tags: ['webhooks'],
        operationId: 'listWebhookDeliveries',
        summary: "A webhook's delivery attempts, newest first (the last 100, kept a week)",
        params: idParams,
        response: answers({ 200: webhookDeliveryPageSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      if (!(await webhooks.get(tenant, request.params.id)))
        throw new ApiError('not_found', `webhook ${request.params.id} not found`);
      return { deliveries: await webhooks.deliveries(tenant, request.params.id) };
    },
  );
}
