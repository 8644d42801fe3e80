import type { FastifyInstance } from 'fastify';
import { ApiError, agentDefinitionSchema } from '../../../libs/contracts/index.js';
import { microUsdToUsd, modelPrice, worstCaseCallMicroUsd } from '../../../libs/runtime/index.js';
import { authenticate, identityOf } from '../auth.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

/** Agents (a change makes a new version, DESIGN §3) and the chat models they may name. */
export function registerAgentRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.post(
    '/v1/agents',
    { schema: { tags: ['agents'], body: agentDefinitionSchema }, preHandler: authenticate(store, 'admin') },
    async (request, reply) => {
      const outcome = await store.putAgent(identityOf(request).tenant, request.body);
      if (outcome.status === 'not_found') throw new ApiError('not_found', 'agent not found');
      return reply
        .code(outcome.status === 'created' ? 201 : 200)
        .send({ ...outcome.agent, version: outcome.version });
    },
  );
  app.put(
    '/v1/agents/:id',
    {
      schema: { tags: ['agents'], params: idParams, body: agentDefinitionSchema },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => {
      const outcome = await store.putAgent(identityOf(request).tenant, request.body, request.params.id);
      if (outcome.status === 'not_found')
        throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return { ...outcome.agent, version: outcome.version };
    },
  );
  app.get(
    '/v1/agents/:id',
    { schema: { tags: ['agents'], params: idParams }, preHandler: authenticate(store, 'runs:read') },
    async (request) => {
      const agent = await store.getAgent(identityOf(request).tenant, request.params.id);
      if (!agent) throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return agent;
    },
  );

  app.get(
    '/v1/models',
    { schema: { tags: ['models'] }, preHandler: authenticate(store, 'runs:read') },
    async () => ({
      default_model: deps.config.models.default_model,
      models: Object.entries(deps.config.models.models).map(([name, entry]) => {
        const price = modelPrice(entry);
        return {
          name,
          provider: entry.provider,
          input_usd_per_mtok: entry.input_usd_per_mtok,
          cached_input_usd_per_mtok: entry.cached_input_usd_per_mtok,
          output_usd_per_mtok: entry.output_usd_per_mtok,
          context_window_tokens: entry.context_window_tokens,
          // ADR-0130 d1: the most one attempt can cost (its window uncached, its output cap, which the
          // adapter always sends); every attempt is checked first, so a run overshoots by this at most.
          worst_case_call_usd: microUsdToUsd(worstCaseCallMicroUsd(price, entry.max_output_tokens)),
        };
      }),
    }),
  );
}
