import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  outputSchemaSchema,
  recordIdSchema,
  sessionViewSchema,
} from '../../../libs/contracts/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

const createSessionSchema = z
  .strictObject({
    /** Omitted: the tenant's default agent (the browser-task budget where browser tools are on). */
    agent_id: recordIdSchema.optional(),
    agent_version: z.string().optional(),
    /** Without `agent_id`: the default agent's variant on this chat model (ops/models.yaml). */
    model: z.string().min(1).max(200).optional(),
    browser_profile_id: z.string().min(1).max(64).optional(),
    /** The JSON Schema the final answers of its runs take, unless a run gives its own. */
    output_schema: outputSchemaSchema.optional(),
  })
  .refine((body) => !(body.model && body.agent_id), {
    message: 'model chooses a variant of the default agent; give it without agent_id',
  });
namedBody(createSessionSchema, 'CreateSession', { browser_profile_id: 'shop' });

/** Sessions (DESIGN §3): the agent version and the profile binding are fixed at creation. */
export function registerSessionRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.post(
    '/v1/sessions',
    {
      schema: {
        tags: ['sessions'],
        operationId: 'createSession',
        summary: 'Create a session: an agent version and, optionally, a profile, fixed for its runs',
        description:
          "Without agent_id, the tenant's default agent (the browser-task budget where browser tools are on), on `model` if given.",
        body: createSessionSchema,
        response: answers({ 201: sessionViewSchema }, 404, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      if (request.body.browser_profile_id) {
        // The session's profile is the caller's tenant's profile of that id.
        const profile = await deps.profiles.profileSettings({
          tenant: identity.tenant,
          id: request.body.browser_profile_id,
        });
        if (!profile) throw new ApiError('not_found', `profile ${request.body.browser_profile_id} not found`);
      }
      const agentId =
        request.body.agent_id ?? (await deps.defaultAgents.ensure(identity.tenant, request.body.model));
      const session = await store.createSession({
        tenant: identity.tenant,
        principal: identity.principal,
        agentId,
        ...(request.body.agent_version ? { agentVersion: request.body.agent_version } : {}),
        ...(request.body.browser_profile_id ? { browserProfileId: request.body.browser_profile_id } : {}),
        ...(request.body.output_schema ? { outputSchema: request.body.output_schema } : {}),
      });
      if (!session) throw new ApiError('not_found', `agent ${agentId} (or that version) not found`);
      return reply.code(201).send(session);
    },
  );
  app.get(
    '/v1/sessions/:id',
    {
      schema: {
        tags: ['sessions'],
        operationId: 'getSession',
        summary: 'A session',
        params: idParams,
        response: answers({ 200: sessionViewSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const session = await store.getSession(identityOf(request).tenant, request.params.id);
      if (!session) throw new ApiError('not_found', `session ${request.params.id} not found`);
      return session;
    },
  );
  app.delete(
    '/v1/sessions/:id',
    {
      schema: {
        tags: ['sessions'],
        operationId: 'deleteSession',
        summary: 'Delete a session; its runs stay readable until their retention ends',
        description: 'Refused 409, naming the run, while one of its runs has not ended.',
        params: idParams,
        response: answers({ 204: z.undefined() }, 404, 409, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const outcome = await store.deleteSession(identityOf(request).tenant, request.params.id);
      if (outcome.status === 'not_found')
        throw new ApiError('not_found', `session ${request.params.id} not found`);
      if (outcome.status === 'active')
        throw new ApiError(
          'conflict',
          `session ${request.params.id} has run ${outcome.runId} not ended; delete it once that run has ended`,
        );
      return reply.code(204).send();
    },
  );
}
