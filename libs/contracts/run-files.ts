import { z } from 'zod';
import { recordIdSchema } from './ids.js';

/**
 * Files in and out of a run (DESIGN §12). A download a lease's page started is kept in the
 * artifact store under the run (`<tenant>/<run id>/<file id>.bin`), its name, type, size and
 * SHA-256 in the run's files hash, named by a `fil_…` id; the bytes are never in Redis.
 */

/** The longest file name kept (a page may suggest any): longer ones are cut. */
export const FILE_NAME_MAX_CHARS = 255;

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
