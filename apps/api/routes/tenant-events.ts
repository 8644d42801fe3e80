import type { FastifyInstance } from 'fastify';
import { tenantEventStreamSchema } from '../../../libs/contracts/rest-views.js';
import { authenticate, identityOf } from '../auth.js';
import { answers } from './openapi.js';
import { typed, type V1Dependencies } from './shared.js';

/**
 * The tenant's event stream: each status event of any of its runs as it happens (a new run, a
 * claim, a park, an end), so a list of runs stays current without reading the list again. The
 * runs page listens to it with its session cookie.
 */
export function registerTenantEventRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  app.get(
    '/v1/events',
    {
      schema: {
        tags: ['runs'],
        operationId: 'streamTenantEvents',
        summary: "The status events of the tenant's runs as Server-Sent Events",
        description:
          "Each run's status events (`run.submitted`, `run.claimed`, `run.parked`, `run.succeeded`, `run.failed`…) from the moment the stream opens, each with its `run_id`; no replay (read `GET /v1/runs` for what came before). Counted with the key's run event streams: at most a few open per key (429 past them).",
        response: {
          200: {
            description: 'The event stream',
            content: { 'text/event-stream': { schema: tenantEventStreamSchema } },
          },
          ...answers({}, 409, 422),
        },
      },
      preHandler: authenticate(deps.store, 'runs:read'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      await deps.eventStreams.serveTenant(reply, identity.tenant, identity.key_id);
    },
  );
}
