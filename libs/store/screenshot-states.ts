import {
  type ApprovalView,
  type RunStep,
  SCREENSHOT_FAILURES,
  type ScreenshotFailure,
  type ScreenshotStatus,
} from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { type ScriptCommands, withScripts } from './scripts.js';

/**
 * Where each of a run's screenshots is (DESIGN §12: an act answers at the page's speed). A
 * navigate or act answers with its screenshot's name as soon as its observation is read; the
 * browser worker then takes the picture, writes it to the artifact store and notes here that it is
 * `stored`, or `failed` and why. The run side records the name in its step as it always did; the
 * step view and the run page read the note beside it. One hash per run, in the run's slot,
 * expiring with the run (`noteScreenshot-2.lua`).
 */

/** The note as stored: `pending`, `stored` or `failed <reason>`. */
function encode(status: ScreenshotStatus): string {
  return status.state === 'failed' ? `failed ${status.reason ?? 'capture_error'}` : status.state;
}

function decode(stored: string): ScreenshotStatus {
  if (stored === 'pending' || stored === 'stored') return { state: stored, reason: null };
  const reason = stored.slice('failed '.length) as ScreenshotFailure;
  return { state: 'failed', reason: SCREENSHOT_FAILURES.includes(reason) ? reason : 'capture_error' };
}

/** What the browser worker writes: a name it answered, then what became of it. */
export class RunScreenshotNotes {
  readonly #redis: RedisClient & ScriptCommands;
  readonly #keys: RunKeys;

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = withScripts(redis);
    this.#keys = new RunKeys(prefix);
  }

  /**
   * `pending`, for a name not noted before; false when the name is taken. A lease whose run has
   * no record (a data plane used without the run side) is noted nothing, and may take the name.
   */
  async pending(runId: string, name: string): Promise<boolean> {
    return (await this.#note(runId, name, 'pending', 2)) !== 'exists';
  }

  /** `stored`, or `failed` with its reason: the end of a pending screenshot. */
  async settled(runId: string, name: string, status: ScreenshotStatus): Promise<void> {
    await this.#note(runId, name, encode(status), 0);
  }

  /** `mode` as the script's ARGV[3]: 0 write, 1 only new, 2 only new or pending. */
  #note(runId: string, name: string, state: string, mode: 0 | 1 | 2): Promise<string> {
    return this.#redis.noteScreenshot(
      this.#keys.run(runId),
      this.#keys.screenshots(runId),
      name,
      state,
      mode,
    );
  }
}

/**
 * Notes `pending` a screenshot the run side named before asking for it (an approval's preview):
 * the approval that names it is visible at once, and reads `pending` until the worker took it.
 */
export async function notePreviewPending(
  redis: RedisClient & ScriptCommands,
  keys: RunKeys,
  runId: string,
  name: string,
): Promise<void> {
  await redis.noteScreenshot(keys.run(runId), keys.screenshots(runId), name, 'pending', 1);
}

/**
 * Notes `failed` with `reason` a name no browser worker took (a preview the run side named whose
 * call was refused), so the card shows why rather than a missing picture. A race with a worker
 * that did take it is not possible: the run side notes this only after the preview call answered.
 */
export async function noteScreenshotMissing(
  redis: RedisClient & ScriptCommands,
  keys: RunKeys,
  runId: string,
  name: string,
  reason: ScreenshotFailure,
): Promise<void> {
  // Over the run side's own `pending` (mode 2), never over a worker's `stored` or `failed`.
  await redis.noteScreenshot(keys.run(runId), keys.screenshots(runId), name, `failed ${reason}`, 2);
}

/** The notes of a run's screenshots, by name (a hash read whole: a run has a few hundred at most). */
export async function readScreenshotNotes(
  redis: RedisClient,
  keys: RunKeys,
  runId: string,
): Promise<Map<string, ScreenshotStatus>> {
  return notesOf(await redis.hgetall(keys.screenshots(runId)));
}

export function notesOf(fields: Record<string, string> | null | undefined): Map<string, ScreenshotStatus> {
  return new Map(Object.entries(fields ?? {}).map(([name, stored]) => [name, decode(stored)]));
}

/**
 * A screenshot's status as the views show it: its note, or — a name with no note, written by a
 * browser worker that stored the picture before it answered — `stored`.
 */
function statusOf(notes: Map<string, ScreenshotStatus>, name: string | null): ScreenshotStatus | null {
  if (name === null) return null;
  return notes.get(name) ?? { state: 'stored', reason: null };
}

export function withStepScreenshots(steps: RunStep[], notes: Map<string, ScreenshotStatus>): RunStep[] {
  return steps.map((step) =>
    step.tool?.screenshot
      ? { ...step, tool: { ...step.tool, screenshot_status: statusOf(notes, step.tool.screenshot) } }
      : step,
  );
}

export function withCardScreenshots(
  approvals: ApprovalView[],
  notes: Map<string, ScreenshotStatus>,
): ApprovalView[] {
  return approvals.map((approval) =>
    approval.card?.screenshot
      ? {
          ...approval,
          card: { ...approval.card, screenshot_status: statusOf(notes, approval.card.screenshot) },
        }
      : approval,
  );
}
