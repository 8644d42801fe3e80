import { createHash } from 'node:crypto';
import type { MultipartFile } from '@fastify/multipart';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { uploadArtifactRef } from '../../../libs/artifacts/index.js';
import {
  ApiError,
  fileIdSchema,
  newId,
  recordIdSchema,
  safeFileName,
  type UploadRecord,
  uploadedFileSchema,
} from '../../../libs/contracts/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, documentBody } from './openapi.js';
import { typed, type V1Dependencies } from './shared.js';

/** The form an upload is sent as: one part named `file` (`curl -F file=@invoice.pdf`). */
const uploadFormSchema = z.object({
  file: z.file().meta({ description: 'The file: its name and type as the part gives them, its bytes' }),
});

/** A part's type kept as given when it looks like a media type; anything else is bytes. */
function contentTypeOf(mimetype: string): string {
  return /^[a-z0-9!#$&^_.+-]{1,64}\/[a-z0-9!#$&^_.+-]{1,128}$/i.test(mimetype)
    ? mimetype.toLowerCase()
    : 'application/octet-stream';
}

/**
 * Files in (DESIGN §12): `POST /v1/files` keeps one uploaded file in the artifact store under an
 * id of its own and answers that id, which a run's input may list (`files`) for its `upload`
 * acts; `GET /v1/files/{id}` reads its record. Another tenant's file is 404. A file past
 * `UPLOAD_MAX_BYTES` is refused 413 and nothing is kept.
 */
export function registerFileRoutes(
  root: FastifyInstance,
  deps: Pick<V1Dependencies, 'store' | 'artifacts' | 'config'>,
): void {
  const app = typed(root);
  const { store } = deps;
  documentBody('POST', '/v1/files', 'multipart/form-data', uploadFormSchema);

  app.post(
    '/v1/files',
    {
      schema: {
        tags: ['files'],
        operationId: 'uploadFile',
        summary: 'Upload a file a run may set a file input to',
        description:
          'A `multipart/form-data` body with one part, `file`. Answers 201 with the file’s id (`fil_…`), name, type, size and SHA-256. The file expires 7 days after it was made unless a run lists it (`files` of a submitted run), then with the last run that does. Past `UPLOAD_MAX_BYTES` (25 MiB unless set) it is refused 413.',
        response: answers({ 201: uploadedFileSchema }, 400, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      const part = await filePart(request, deps.config.files.uploadMaxBytes);
      const bytes = await part.toBuffer().catch((error: unknown) => {
        throw multipartError(error, deps.config.files.uploadMaxBytes);
      });
      const record: UploadRecord = {
        id: newId('fil'),
        tenant: identity.tenant,
        principal: identity.principal,
        name: safeFileName(part.filename || 'upload'),
        content_type: contentTypeOf(part.mimetype),
        size_bytes: bytes.byteLength,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        created_at_ms: Date.now(),
      };
      // The record first: a sweep that finds the bytes before their record would delete them. A
      // record whose bytes never landed is refused at the act, as a file that is not the run's.
      const view = await store.uploads.create(record);
      await deps.artifacts.put(uploadArtifactRef(identity.tenant, record.id), bytes, record.content_type);
      return reply.code(201).send(view);
    },
  );

  app.get(
    '/v1/files/:id',
    {
      schema: {
        tags: ['files'],
        operationId: 'getFile',
        summary: 'An uploaded file’s record: name, type, size, SHA-256 and when it expires',
        params: z.object({ id: recordIdSchema }),
        response: answers({ 200: uploadedFileSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const fileId = fileIdSchema.safeParse(request.params.id);
      const file = fileId.success ? await store.uploads.get(tenant, fileId.data) : undefined;
      if (!file) throw new ApiError('not_found', `file ${request.params.id} not found`);
      return file;
    },
  );
}

/** The request's one file part, its size bounded as it streams in. */
async function filePart(request: FastifyRequest, maxBytes: number): Promise<MultipartFile> {
  if (!request.isMultipart())
    throw new ApiError('bad_request', 'send the file as multipart/form-data with one part named file');
  let part: MultipartFile | undefined;
  try {
    part = await request.file({ limits: { fileSize: maxBytes, files: 1, fields: 0, parts: 1 } });
  } catch (error) {
    throw multipartError(error, maxBytes);
  }
  if (part?.fieldname !== 'file')
    throw new ApiError('validation_failed', 'file: one part named file, holding the file');
  return part;
}

/** A multipart failure as the one error shape: too large is 413, anything else a bad request. */
function multipartError(error: unknown, maxBytes: number): ApiError {
  const code = (error as { code?: unknown } | null)?.code;
  if (code === 'FST_REQ_FILE_TOO_LARGE')
    return new ApiError('payload_too_large', `the file is larger than ${maxBytes} bytes`);
  if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT')
    return new ApiError('validation_failed', 'file: one part named file, holding the file');
  return new ApiError('bad_request', 'the multipart body could not be read');
}
