import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  fileArtifactName,
  fileIdSchema,
  type RunFile,
  recordIdSchema,
  runFileListSchema,
} from '../../../libs/contracts/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers } from './openapi.js';
import { typed, type V1Dependencies } from './shared.js';

const binary = z.file().meta({ description: 'the file’s bytes, as the page sent them' });

/**
 * `Content-Disposition: attachment` with the name both as plain ASCII (anything else a `_`) and
 * in RFC 5987's UTF-8 form, which browsers prefer.
 */
export function attachmentHeader(name: string): string {
  const ascii = name.replace(/[^\x20-\x7e]|["\\%]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(name)}`;
}

/**
 * A run's downloads (DESIGN §12): listed with name, type, size and SHA-256, and each served
 * after the run's tenant check, as an attachment a browser never renders on the API's origin:
 * `nosniff` keeps the stored type, and `Content-Security-Policy: sandbox` stops an HTML or SVG
 * file from running script even when opened directly. Another tenant's run, a run gone with its
 * retention and a cancelled download are all 404.
 */
export function registerRunFileRoutes(
  root: FastifyInstance,
  deps: Pick<V1Dependencies, 'store' | 'artifacts'>,
): void {
  const app = typed(root);
  const { store } = deps;

  app.get(
    '/v1/runs/:id/files',
    {
      schema: {
        tags: ['runs'],
        operationId: 'listRunFiles',
        summary: "A run's downloads, oldest first: kept, or cancelled and why",
        params: z.object({ id: recordIdSchema }),
        response: answers({ 200: runFileListSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      return { files: await store.listRunFiles(run.id) };
    },
  );

  app.get(
    '/v1/runs/:id/files/:file',
    {
      schema: {
        tags: ['runs'],
        operationId: 'getRunFile',
        summary: 'One of a run’s downloads, as an attachment',
        // The id is checked in the handler: one that could never be a file id is a bad request.
        params: z.object({ id: recordIdSchema, file: z.string() }),
        response: {
          200: {
            description: 'The file’s bytes, with the type its name says',
            content: { 'application/octet-stream': { schema: binary } },
          },
          ...answers({}, 400, 404, 422),
        },
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request, reply) => {
      const { tenant } = identityOf(request);
      const fileId = fileIdSchema.safeParse(request.params.file);
      if (!fileId.success) throw new ApiError('bad_request', 'file: a file id such as fil_0a1b2c3d');
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const file = (await store.listRunFiles(run.id)).find((f) => f.id === fileId.data);
      const stored =
        file?.state === 'stored'
          ? await deps.artifacts.get({ tenant, runId: run.id, name: fileArtifactName(file.id) })
          : undefined;
      if (!file || !stored) throw new ApiError('not_found', `file ${fileId.data} of run ${run.id} not found`);
      return sendAttachment(reply, file, stored.bytes);
    },
  );
}

/** The bytes as they are: Fastify sends a Buffer without its serializer (the schema is for OpenAPI). */
function sendAttachment(reply: FastifyReply, file: RunFile, bytes: Uint8Array): FastifyReply {
  return reply
    .header('content-type', file.content_type)
    .header('content-disposition', attachmentHeader(file.name))
    .header('x-content-type-options', 'nosniff')
    .header('content-security-policy', 'sandbox')
    .header('cache-control', 'private, no-store')
    .send(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
}
