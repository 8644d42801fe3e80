import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { ApiError, artifactNameSchema, recordIdSchema } from '../../../libs/contracts/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers } from './openapi.js';
import { typed, type V1Dependencies } from './shared.js';

/**
 * Artifact names are random and written once (a screenshot is never replaced under its name), so
 * a browser may keep one; `private` keeps it out of shared caches, since it shows a tenant's page.
 */
export const ARTIFACT_CACHE_CONTROL = 'private, max-age=86400, immutable';

const binary = z.file().meta({ description: 'the artifact’s bytes' });

/**
 * A run's artifacts: the screenshots its steps and approval cards name, answered from the
 * artifact store after the run's tenant check. Another tenant's run, a run gone with its retention
 * and an artifact never written are all 404; a name that could never be an artifact is 400 before
 * anything is read.
 */
export function registerArtifactRoutes(
  root: FastifyInstance,
  deps: Pick<V1Dependencies, 'store' | 'artifacts'>,
): void {
  const app = typed(root);
  const { store, artifacts } = deps;

  app.get(
    '/v1/runs/:id/artifacts/:name',
    {
      schema: {
        tags: ['runs'],
        operationId: 'getRunArtifact',
        summary: "One of a run's artifacts (a step's screenshot, an approval card's outlined preview)",
        // The name is checked in the handler, not here: a name that fails is a bad request (400),
        // where a failed params schema would answer 422 as for a bad body.
        params: z.object({ id: recordIdSchema, name: z.string() }),
        response: {
          200: {
            description: 'The artifact, with the content type it was stored with',
            content: { 'image/jpeg': { schema: binary }, 'image/png': { schema: binary } },
          },
          ...answers({}, 400, 404, 409, 422),
        },
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const { tenant } = identityOf(request);
      const name = artifactNameSchema.safeParse(request.params.name);
      if (!name.success)
        throw new ApiError('bad_request', 'artifact name: letters, digits, _ or -, then .jpg or .png');
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const artifact = await artifacts.get({ tenant, runId: run.id, name: name.data });
      if (!artifact) throw new ApiError('not_found', `artifact ${name.data} of run ${run.id} not found`);
      return sendBytes(reply, artifact);
    },
  );
}

/**
 * The bytes as they are: Fastify sends a Buffer without its serializer (the response schema above
 * describes them for OpenAPI only). `nosniff`: a browser takes the stored type, never a guess.
 */
function sendBytes(reply: FastifyReply, artifact: { bytes: Uint8Array; contentType: string }): FastifyReply {
  return reply
    .header('content-type', artifact.contentType)
    .header('cache-control', ARTIFACT_CACHE_CONTROL)
    .header('x-content-type-options', 'nosniff')
    .send(Buffer.from(artifact.bytes.buffer, artifact.bytes.byteOffset, artifact.bytes.byteLength));
}
