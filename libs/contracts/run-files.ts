import { z } from 'zod';
import { recordIdSchema } from './ids.js';

/**
 * Files in and out of a run (DESIGN §12). A download a lease's page started is kept in the
 * artifact store under the run (`<tenant>/<run id>/<file id>.bin`), its name, type, size and
 * SHA-256 in the run's files hash. An upload is kept under its own id
 * (`<tenant>/<file id>/<file id>.bin`), its record under the file's own key, until the runs that
 * list it are gone. Both are named by a `fil_…` id; the bytes are never in Redis.
 */

/** The longest file name kept (a page may suggest any): longer ones are cut. */
export const FILE_NAME_MAX_CHARS = 255;
/** An upload past this many bytes is refused (`UPLOAD_MAX_BYTES`' default, 25 MiB). */
export const UPLOAD_MAX_BYTES_DEFAULT = 25 * 1024 * 1024;
/**
 * An upload lives at least this long after it was made (7 days), longer while a run that lists it
 * is kept: it expires with the last of them.
 */
export const UPLOAD_UNUSED_TTL_MS = 7 * 86_400_000;
/** How many uploaded files one run's input may list. */
export const RUN_INPUT_FILES_MAX = 16;

export const fileIdSchema = recordIdSchema.refine((id) => id.startsWith('fil_'), 'a file id (fil_…)');

/** The artifact store's name for a file's bytes: its id, never the name a page or caller gave. */
export function fileArtifactName(fileId: string): string {
  return `${fileId}.bin`;
}

/**
 * A name as a page or a caller gave it, made safe to show and to send in a header: no path, no
 * control characters, bounded; `download` when nothing is left.
 */
export function safeFileName(name: string): string {
  const base = name.split(/[\\/]/).pop() ?? '';
  const cleaned = base
    .replace(/\p{Cc}/gu, '')
    .trim()
    .slice(0, FILE_NAME_MAX_CHARS);
  return cleaned === '' || cleaned === '.' || cleaned === '..' ? 'download' : cleaned;
}

/**
 * `stored` once the bytes are in the artifact store; `cancelled` when a limit stopped it
 * (`too_large`: past the per-file limit, `run_limit`: past what the run had left) or the page or
 * browser failed it (`failed`); `store_error` when the bytes could not be written.
 */
export const DOWNLOAD_STATES = ['stored', 'cancelled'] as const;
export const DOWNLOAD_CANCEL_REASONS = ['too_large', 'run_limit', 'failed', 'store_error'] as const;
export type DownloadCancelReason = (typeof DOWNLOAD_CANCEL_REASONS)[number];

const sha256Schema = z.string().regex(/^[0-9a-f]{64}$/);

/** One download of a run, as listed at `GET /v1/runs/{id}/files` and named on its step. */
export const runFileSchema = z.object({
  id: fileIdSchema,
  name: z.string(),
  content_type: z.string(),
  /** Bytes kept; for a cancelled download, the bytes seen before it was stopped. */
  size_bytes: z.number().int().nonnegative(),
  /** Of the bytes kept; null for a cancelled download. */
  sha256: sha256Schema.nullable(),
  state: z.enum(DOWNLOAD_STATES),
  reason: z.enum(DOWNLOAD_CANCEL_REASONS).nullable(),
  created_at_ms: z.number().int().nonnegative(),
});
export type RunFile = z.output<typeof runFileSchema>;

export const runFileListSchema = z.object({ files: z.array(runFileSchema) });

/** An uploaded file, as `POST /v1/files` and `GET /v1/files/{id}` answer it. */
export const uploadedFileSchema = z.object({
  id: fileIdSchema,
  name: z.string(),
  content_type: z.string(),
  size_bytes: z.number().int().nonnegative(),
  sha256: sha256Schema,
  created_at_ms: z.number().int().nonnegative(),
  /** When it expires; null while a run that lists it is kept (it then expires with the last of them). */
  expires_at_ms: z.number().int().nonnegative().nullable(),
});
export type UploadedFile = z.output<typeof uploadedFileSchema>;

/** An upload's record as the store keeps it: the view's fields and whose it is. */
export const uploadRecordSchema = uploadedFileSchema.omit({ expires_at_ms: true }).extend({
  tenant: z.string(),
  principal: z.string(),
});
export type UploadRecord = z.output<typeof uploadRecordSchema>;

/** The file ids a run's input lists (`files`), none when it lists none or is not an object. */
export function inputFileIds(input: unknown): string[] {
  const files = (input as { files?: unknown } | null)?.files;
  return Array.isArray(files) ? files.filter((id): id is string => typeof id === 'string') : [];
}
