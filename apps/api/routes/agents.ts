import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  type AgentDefinition,
  ApiError,
  agentDefinitionSchema,
  agentViewSchema,
} from '../../../libs/contracts/index.js';
import { agentVersionViewSchema, modelListSchema } from '../../../libs/contracts/rest-views.js';
import {
  BROWSER_TASK_LIMITS_KEY,
  microUsdToUsd,
  modelPrice,
  worstCaseCallMicroUsd,
} from '../../../libs/runtime/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

namedBody(agentDefinitionSchema, 'AgentDefinition', {
  model: 'scripted',
  instructions: 'Work the page with the browser tools; answer with what you found.',
  tools: ['browser.navigate', 'browser.observe', 'browser.act'],
  limits: { max_steps: 20 },
});

/**
 * A change of an agent: the fields given replace its latest definition's; `metadata` is merged key
 * by key, a key set to null removed.
 */
const changeAgentSchema = namedBody(
  z
    .strictObject({
      model: agentDefinitionSchema.shape.model,
      instructions: agentDefinitionSchema.shape.instructions,
      tools: agentDefinitionSchema.shape.tools.unwrap(),
      limits: agentDefinitionSchema.shape.limits.unwrap(),
      metadata: z.record(z.string(), z.json()),
    })
    .partial()
    .refine((change) => Object.keys(change).length > 0, { message: 'name at least one field to change' }),
  'ChangeAgent',
  { instructions: 'Work the page with the browser tools; answer with what you found, in one line.' },
);

/**
 * ADR-0130 d2: the browser-task budget is the composition root's to put in the default agent's
 * metadata, never a caller's (its version would carry a budget nobody configured).
 */
function refuseReservedMetadata(metadata: Readonly<Record<string, unknown>> | undefined): void {
  if (metadata && Object.hasOwn(metadata, BROWSER_TASK_LIMITS_KEY))
    throw new ApiError(
      'validation_failed',
      `metadata.${BROWSER_TASK_LIMITS_KEY} is reserved: the deployment sets it on the default agent`,
    );
}

/** The latest definition with the change applied; metadata merged, a null value removing its key. */
function changedDefinition(latest: AgentDefinition, change: z.output<typeof changeAgentSchema>): unknown {
  const { metadata, ...rest } = change;
  const merged: Record<string, unknown> = { ...latest.metadata };
  for (const [key, value] of Object.entries(metadata ?? {})) {
    if (value === null) delete merged[key];
    else merged[key] = value;
  }
  return { ...latest, ...rest, metadata: merged };
}

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
      refuseReservedMetadata(request.body.metadata);
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
      refuseReservedMetadata(request.body.metadata);
      const outcome = await store.putAgent(identityOf(request).tenant, request.body, request.params.id);
      if (outcome.status === 'not_found')
        throw new ApiError('not_found', `agent ${request.params.id} not found`);
      return { ...outcome.agent, version: outcome.version };
    },
  );
  app.patch(
    '/v1/agents/:id',
    {
      schema: {
        tags: ['agents'],
        operationId: 'changeAgent',
        summary: "Change some of an agent's definition: a new version; sessions made before keep theirs",
        description:
          'The fields given replace those of its latest version; metadata is merged key by key (null removes a key). metadata.browser_task_limits is reserved (422).',
        params: idParams,
        body: changeAgentSchema,
        response: answers({ 200: agentVersionViewSchema }, 404, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'admin'),
    },
    async (request) => {
      refuseReservedMetadata(request.body.metadata);
      const { tenant } = identityOf(request);
      const agent = await store.getAgent(tenant, request.params.id);
      const latest = agent && (await store.getAgentVersion(tenant, agent.id, agent.latest_version));
      if (!agent || !latest) throw new ApiError('not_found', `agent ${request.params.id} not found`);
      const definition = agentDefinitionSchema.safeParse(changedDefinition(latest, request.body));
      if (!definition.success)
        throw new ApiError('validation_failed', definition.error.issues[0]?.message ?? 'not a definition');
      const outcome = await store.putAgent(tenant, definition.data, agent.id);
      if (outcome.status === 'not_found') throw new ApiError('not_found', `agent ${agent.id} not found`);
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
