import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { lookup } from 'mime-types';
import type { Logger } from 'pino';
import type { ArtifactStore } from '../artifacts/index.js';
import type { PageDownload } from '../browser/index.js';
import {
  type DownloadCancelReason,
  fileArtifactName,
  type LeaseScope,
  newId,
  type RunFile,
  safeFileName,
} from '../contracts/index.js';
import type { PageSession } from './pages.js';

/** Where a run's download records go (`RunFileNotes` in the store). */
export interface RunFileNotesPort {
  /** Counts the bytes against the run's limit; false when they would pass it. */
  reserve(runId: string, fileId: string, sizeBytes: number, runLimitBytes: number): Promise<boolean>;
  keptBytes(runId: string): Promise<number>;
  note(runId: string, file: RunFile): Promise<void>;
}

/** What the browser worker needs to keep a lease's downloads. */
export interface LeaseFiles {
  store: ArtifactStore;
  notes: RunFileNotesPort;
  /** `BROWSER_DOWNLOAD_MAX_BYTES`: a download past it is cancelled. */
  maxFileBytes: number;
  /** `RUN_DOWNLOADS_MAX_BYTES`: a run's stored downloads together stay under it. */
  maxRunBytes: number;
  log?: Logger | undefined;
}

/**
 * The type a file's name says it is (Playwright's download carries no response headers), as
 * mime-db lists it; anything it does not know is bytes. It is only shown and sent back as a
 * label: the files route serves every file as an attachment that no browser runs.
 */
export function contentTypeOf(name: string): string {
  return lookup(name) || 'application/octet-stream';
}

interface Started {
  startedAtMs: number;
  kept: Promise<RunFile | undefined>;
}

/**
 * The downloads of a lease's pages (DESIGN §12): each is kept in the artifact store under the
 * lease's run, or cancelled past a limit, and noted under the run either way. A call that started
 * downloads answers them (its step and the model learn what arrived); one started outside a call
 * is listed under the run all the same.
 */
export class LeaseDownloads {
  readonly #files: LeaseFiles;
  readonly #started = new WeakMap<PageSession, Started[]>();

  constructor(files: LeaseFiles) {
    this.#files = files;
  }

  /** Starts keeping the session's downloads for `scope`'s run (once per session). */
  watch(session: PageSession, scope: LeaseScope): void {
    if (this.#started.has(session) || !session.onDownload) return;
    const started: Started[] = [];
    this.#started.set(session, started);
    session.onDownload((download) => {
      started.push({ startedAtMs: download.startedAtMs, kept: this.#keep(scope, download) });
    });
  }

  /**
   * The downloads started since `sinceMs`, each once it ended (waited for until `deadlineMs`; one
   * still arriving then is left out here, and listed under the run when it ends).
   */
  async since(session: PageSession, sinceMs: number, deadlineMs: number): Promise<RunFile[]> {
    const started = (this.#started.get(session) ?? []).filter((entry) => entry.startedAtMs >= sinceMs);
    if (started.length === 0) return [];
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), Math.max(0, deadlineMs - Date.now()));
    });
    try {
      const files = await Promise.all(started.map((entry) => Promise.race([entry.kept, late])));
      return files.filter((file): file is RunFile => file !== undefined);
    } finally {
      clearTimeout(timer);
    }
  }

  async #keep(scope: LeaseScope, download: PageDownload): Promise<RunFile | undefined> {
    const { store, notes, maxFileBytes, maxRunBytes, log } = this.#files;
    const runId = scope.run_id;
    const name = safeFileName(download.suggestedName);
    const file = {
      id: newId('fil'),
      name,
      content_type: contentTypeOf(name),
      created_at_ms: download.startedAtMs,
    };
    const cancelled = async (reason: DownloadCancelReason, sizeBytes: number) => {
      const record: RunFile = { ...file, size_bytes: sizeBytes, sha256: null, state: 'cancelled', reason };
      await notes.note(runId, record);
      return record;
    };
    try {
      const runLeftBytes = Math.max(0, maxRunBytes - (await notes.keptBytes(runId)));
      const runBound = runLeftBytes < maxFileBytes;
      download.limit(Math.min(maxFileBytes, runLeftBytes));
      const end = await download.finished();
      if (!end.ok) {
        const reason = end.reason === 'too_large' ? (runBound ? 'run_limit' : 'too_large') : 'failed';
        return await cancelled(reason, end.receivedBytes);
      }
      const bytes = await readFile(end.path);
      if (bytes.byteLength > maxFileBytes) return await cancelled('too_large', bytes.byteLength);
      if (!(await notes.reserve(runId, file.id, bytes.byteLength, maxRunBytes)))
        return await cancelled('run_limit', bytes.byteLength);
      try {
        await store.put(
          { tenant: scope.tenant, runId, name: fileArtifactName(file.id) },
          bytes,
          file.content_type,
        );
      } catch (error) {
        log?.warn({ run_id: runId, err: error }, 'download could not be stored');
        return await cancelled('store_error', bytes.byteLength);
      }
      const record: RunFile = {
        ...file,
        size_bytes: bytes.byteLength,
        sha256: createHash('sha256').update(bytes).digest('hex'),
        state: 'stored',
        reason: null,
      };
      await notes.note(runId, record);
      return record;
    } catch (error) {
      log?.warn({ run_id: runId, err: error }, 'download could not be kept');
      return undefined;
    } finally {
      await download.delete();
    }
  }
}
