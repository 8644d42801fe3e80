import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { type RunView, runHasEnded } from '../contracts/index.js';
import { BrowserWorkerAway } from '../provider/index.js';
import type { RunLifecycle } from '../runtime/run-lifecycle.js';
import type { RunStore } from '../store/index.js';

/**
 * An execution is re-run at most this often after a retryable fault (a lost Redis
 * connection, a browser worker restarting), with a backoff doubling from RUN_HANDBACK_BASE_MS
 * ({@link HAND_BACK_BASE_MS} unless set) — 31 s in all by default, well inside a run's deadline;
 * past it the run fails `provider_unavailable` (its browser worker stayed away) or `internal_error`.
 */
export const MAX_FAULT_HANDBACKS = 5;
export const HAND_BACK_BASE_MS = 1_000;

/** The backoff before the `handbacks`-th re-execution (1-based): 1 s, 2 s, 4 s, … from `baseMs`. */
export function handBackDelayMs(handbacks: number, baseMs = HAND_BACK_BASE_MS): number {
  return baseMs * 2 ** Math.max(0, handbacks - 1);
}

/** Network failures that a Redis or browser worker restart causes and that pass by themselves. */
const TRANSIENT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EAI_AGAIN',
]);
const TRANSIENT_MESSAGES =
  /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET|socket hang up/;

/**
 * Whether an error that escaped an execution may pass if the run is tried again: a connection
 * lost to Redis or a browser worker, or an error our own code marks `retryable` (a browser
 * worker that is restarting answers `provider_unavailable`). Everything else is a fault in the
 * run or in this code, and re-running would meet it again. The cause chain is walked.
 */
export function isRetryableFault(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth += 1) {
    const { code, retryable } = current as { code?: unknown; retryable?: unknown };
    if (retryable === true) return true;
    if (typeof code === 'string' && TRANSIENT_CODES.has(code)) return true;
    if (current.name === 'MaxRetriesPerRequestError' || TRANSIENT_MESSAGES.test(current.message)) return true;
    current = current.cause;
  }
  return false;
}

/** An id naming one escaped error in the run's message and in the (one) log line that has its stack. */
export function newErrorId(): string {
  return `err_${randomBytes(8).toString('hex')}`;
}

export interface EscapedDeps {
  store: Pick<RunStore, 'releaseRun' | 'finishRun' | 'getRun'>;
  /** Carries out an ended run's consequences: its lease released, its parent resumed, its end counted. */
  lifecycle: Pick<RunLifecycle, 'followUp'>;
  logger: Logger;
  /** RUN_HANDBACK_BASE_MS: the first hand-back's wait; {@link HAND_BACK_BASE_MS} when absent. */
  handBackBaseMs?: number;
}

/** What became of a run whose execution an error escaped. */
export type EscapedOutcome =
  | { kind: 'handed_back'; delayMs: number; errorId: string }
  | { kind: 'failed'; errorId: string; code: 'internal_error' | 'provider_unavailable' }
  /** The run was no longer this execution's (taken over, cancelled, ended): nothing to do. */
  | { kind: 'gone'; errorId: string };

/**
 * No stranded run: an error escaped this execution of `run`. A retryable one hands the
 * run back (`queued`, same execution, lease kept for reattach) for at most
 * {@link MAX_FAULT_HANDBACKS} re-executions; any other — or one past the bound — fails the run
 * `internal_error` with an error id, and closes its lease in the same step, so the upkeep never
 * renews a failed run's lease again. One log line carries the id and the stack; the run's message
 * carries the id only (never a stack or a secret).
 */
export async function settleEscapedError(
  deps: EscapedDeps,
  run: RunView,
  ownerToken: string,
  error: unknown,
): Promise<EscapedOutcome> {
  const errorId = newErrorId();
  // The profile's browser worker is gone or restarting — the run waits for it, visibly,
  // and past the bound fails the tool's own code, not internal_error.
  const waitingFor = error instanceof BrowserWorkerAway ? error.waitingFor : undefined;
  if (isRetryableFault(error)) {
    const released = await deps.store.releaseRun(run.id, ownerToken, {
      detail: waitingFor
        ? { reason: 'browser_worker', waiting_for: waitingFor, error_id: errorId }
        : { reason: 'fault', error_id: errorId },
      maxHandbacks: MAX_FAULT_HANDBACKS,
    });
    if (released.ok) {
      const delayMs = handBackDelayMs(Number(released.detail), deps.handBackBaseMs);
      deps.logger.warn(
        { err: error, error_id: errorId, run_id: run.id, retry_in_ms: delayMs },
        'execution failed on a retryable fault; the run is handed back',
      );
      return { kind: 'handed_back', delayMs, errorId };
    }
    if (released.code !== 'stale_execution') return await gone(deps, run, error, errorId);
  }
  const code = waitingFor ? 'provider_unavailable' : 'internal_error';
  // The owner's end, so a run another worker has taken over meanwhile is refused, not failed under it.
  const failed = await deps.store.finishRun(run.id, ownerToken, {
    status: 'failed',
    code,
    message: waitingFor
      ? `the profile's browser worker did not come back (error id ${errorId})`
      : `an internal error ended the run (error id ${errorId})`,
    // The tool's own code names the step its call was at, as the loop's ends do.
    ...(waitingFor ? { step: await stepInFlight(deps, run) } : {}),
  });
  if (!failed.ok) return await gone(deps, run, error, errorId);
  // The line tells the code the run was failed with, not always internal_error.
  deps.logger.error(
    { err: error, error_id: errorId, run_id: run.id, code },
    waitingFor
      ? `execution failed: the profile's browser worker did not come back; the run is failed ${code}`
      : `execution failed on an internal error; the run is failed ${code}`,
  );
  // Its lease released in the same step, so the upkeep never renews a failed run's lease again.
  await deps.lifecycle.followUp(failed.run, { ended: true });
  return { kind: 'failed', errorId, code };
}

/**
 * The run moved on without this execution (taken over, cancelled) or had already ended when the
 * error came (after its end was written, before its lease was closed): an ended run's lease is
 * closed here, since this execution's own close never ran.
 */
async function gone(
  deps: EscapedDeps,
  run: RunView,
  error: unknown,
  errorId: string,
): Promise<EscapedOutcome> {
  deps.logger.warn(
    { err: error, error_id: errorId, run_id: run.id },
    'execution failed after its run moved on; nothing to settle',
  );
  const now = await deps.store.getRun(run.id);
  if (now && runHasEnded(now.status)) await deps.lifecycle.followUp(now);
  return { kind: 'gone', errorId };
}

/**
 * The run's step index a tool call that escaped was at: its model turn, counted from 1, as the
 * run's usage (written by its owner with each model call) has it now.
 */
async function stepInFlight(deps: EscapedDeps, run: RunView): Promise<number> {
  const now = (await deps.store.getRun(run.id)) ?? run;
  return Math.max(1, now.usage.steps);
}
