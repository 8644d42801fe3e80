import type { Logger } from 'pino';
import type { ArtifactStore } from '../artifacts/index.js';
import type { Box, Capture } from '../browser/index.js';
import {
  type LeaseScope,
  newScreenshotName,
  type ScreenshotFailure,
  type ScreenshotStatus,
} from '../contracts/index.js';
import type { Counter } from '../telemetry/index.js';
import { isRedisUnreachable } from '../telemetry/redis-link.js';
import type { LeaseFiles } from './lease-downloads.js';
import type { PageSession } from './pages.js';

/**
 * Where each screenshot a lease's calls named is (`RunScreenshotNotes` in the store): `pending`
 * when the call answers, then `stored` or `failed` with the reason. The step view reads them.
 */
export interface ScreenshotNotes {
  /** Notes a new name `pending`; false when the name is taken. */
  pending(runId: string, name: string): Promise<boolean>;
  settled(runId: string, name: string, status: ScreenshotStatus): Promise<void>;
}

/**
 * Where the browser worker puts what its pages capture: the artifact store, under the
 * lease scope's tenant and run, a note of each screenshot's state, and a count of the screenshots
 * that could not be had. A failed capture or write never fails the call it follows.
 */
export interface LeaseArtifacts {
  store: ArtifactStore;
  /** `LeaseMetrics.screenshotFailures`: `stage` capture or store. */
  failures: Counter<'stage'>;
  /** Without them a screenshot that fails is only counted and logged. */
  notes?: ScreenshotNotes | undefined;
  /** `BROWSER_SCREENSHOT_TIMEOUT_MS`: longest one capture may take (a failed one is tried once more). */
  captureTimeoutMs: number;
  log?: Logger;
  /** Where a lease's downloads are kept (DESIGN §12); without it, downloads are cancelled. */
  files?: LeaseFiles | undefined;
}

const FAILURE_OF: Record<Exclude<Capture, { ok: true }>['reason'], ScreenshotFailure> = {
  timeout: 'capture_timeout',
  error: 'capture_error',
  dialog_open: 'dialog_open',
  page_closed: 'page_closed',
};

/**
 * The screenshots of a lease's pages, off the answer's path (DESIGN §12: an act answers at the
 * page's speed). A navigate, an act or a preview names its screenshot up front and notes it
 * `pending` before it answers; the capture runs right after the answer, in the lease's call order
 * (so the picture is the page the answer described, before any later call touches it); the write
 * to the artifact store and the final note run beside the lease's next calls, never in front.
 */
export class LeaseScreenshots {
  readonly #artifacts: LeaseArtifacts;
  readonly #writes = new Set<Promise<void>>();

  constructor(artifacts: LeaseArtifacts) {
    this.#artifacts = artifacts;
  }

  /**
   * A name for the screenshot about to be taken (`name` when the caller chose it), noted
   * `pending`; undefined when none can be promised (the name is taken, or the note could not be
   * written), and then none is taken.
   */
  async announce(scope: LeaseScope, kind: 'shot' | 'preview', name?: string): Promise<string | undefined> {
    const chosen = name ?? newScreenshotName(kind);
    const notes = this.#artifacts.notes;
    if (!notes) return chosen;
    try {
      return (await notes.pending(scope.run_id, chosen)) ? chosen : undefined;
    } catch (error) {
      this.#artifacts.failures.inc({ stage: 'store' });
      // An outage is logged once, by the link watch, not once per screenshot it kept from its note.
      if (isRedisUnreachable(error))
        this.#artifacts.log?.debug({ run_id: scope.run_id }, 'screenshot could not be noted');
      else this.#artifacts.log?.warn({ run_id: scope.run_id, err: error }, 'screenshot could not be noted');
      return undefined;
    }
  }

  /**
   * Takes the announced screenshot: the capture now (the caller runs this in the lease's call
   * order and waits for it alone), tried once more when it timed out or failed; then the write and
   * the note, tracked apart. `outline` null: the target could not be outlined (a dialog holds the
   * page).
   */
  take(session: PageSession, scope: LeaseScope, name: string, outline?: Box | null): Promise<void> {
    const captured: Promise<Capture> =
      outline === null
        ? Promise.resolve({ ok: false, reason: 'dialog_open' })
        : this.#capture(session, outline);
    const write = captured
      .then((capture) => this.#keep(scope, name, capture))
      .finally(() => this.#writes.delete(write));
    this.#writes.add(write);
    return captured.then(() => undefined);
  }

  /** Resolves once every screenshot begun so far is stored or noted failed (shutdown, tests). */
  async drained(): Promise<void> {
    while (this.#writes.size > 0) await Promise.all([...this.#writes]);
  }

  async #capture(session: PageSession, outline: Box | undefined): Promise<Capture> {
    if (!session.screenshot) return { ok: false, reason: 'error' };
    const options = { timeoutMs: this.#artifacts.captureTimeoutMs, outline };
    const first = await session.screenshot(options);
    // A capture a loaded host let time out, or a renderer hiccup, is worth one more try; a page
    // held by a dialog or closed is not.
    if (first.ok || (first.reason !== 'timeout' && first.reason !== 'error')) return first;
    return session.screenshot(options);
  }

  async #keep(scope: LeaseScope, name: string, capture: Capture): Promise<void> {
    const { store, failures, notes, log } = this.#artifacts;
    let status: ScreenshotStatus;
    if (!capture.ok) {
      failures.inc({ stage: 'capture' });
      log?.warn({ run_id: scope.run_id, reason: capture.reason }, 'screenshot could not be captured');
      status = { state: 'failed', reason: FAILURE_OF[capture.reason] };
    } else {
      try {
        await store.put({ tenant: scope.tenant, runId: scope.run_id, name }, capture.bytes, 'image/jpeg');
        status = { state: 'stored', reason: null };
      } catch (error) {
        failures.inc({ stage: 'store' });
        log?.warn({ run_id: scope.run_id, err: error }, 'screenshot could not be stored');
        status = { state: 'failed', reason: 'store_error' };
      }
    }
    await notes?.settled(scope.run_id, name, status).catch((error: unknown) => {
      log?.warn({ run_id: scope.run_id, err: error }, 'screenshot note could not be written');
    });
  }
}
