import type { FastifyInstance } from 'fastify';
import { ApiError, agentDefinitionSchema, agentViewSchema } from '../../../libs/contracts/index.js';
import { agentVersionViewSchema, modelListSchema } from '../../../libs/contracts/rest-views.js';
import { microUsdToUsd, modelPrice, worstCaseCallMicroUsd } from '../../../libs/runtime/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

namedBody(agentDefinitionSchema, 'AgentDefinition', {
  model: 'scripted',
  instructions: 'Work the page with the browser tools; answer with what you found.',
  tools: ['browser.navigate', 'browser.observe', 'browser.act'],
  limits: { max_steps: 20 },
});

/** Agents (a change makes a new version, DESIGN §3) and the chat models they may name. */
export function registerAgentRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.post(
    '/v1/agents',
    {
      schema: {
        tags: ['agents'],
        operationId: 'createAgent',
        summary: 'Create an agent; its version is the SHA-256 of its definition',
        description: 'Answers 201 with the agent and the version its definition was stored as.',
        body: agentDefinitionSchema,
        response: answers(
          { 200: agentVersionViewSchema, 201: agentVersionViewSchema },
          404,
          ...BODY_FAILURES,
        ),
      },
      preHandler: authenticate(store, 'admin'),
    },
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
      schema: {
        tags: ['agents'],
        operationId: 'updateAgent',
        summary: "Change an agent's definition: a new version; sessions made before keep theirs",
        params: idParams,
        body: agentDefinitionSchema,
        response: answers({ 200: agentVersionViewSchema }, 404, ...BODY_FAILURES),
      },
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
    {
      schema: {
        tags: ['agents'],
        operationId: 'getAgent',
        summary: 'An agent and its latest version',
        params: idParams,
        response: answers({ 200: agentViewSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const agent = await store.getAgent(identityOf(request).tenant, request.params.id);
      if (!agent) throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return agent;
    },
  );

  app.get(
    '/v1/models',
    {
      schema: {
        tags: ['models'],
        operationId: 'listModels',
        summary: 'The chat models an agent may name, with their prices',
        response: answers({ 200: modelListSchema }),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
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
