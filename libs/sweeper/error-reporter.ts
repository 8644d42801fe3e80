import { ApiError } from '../contracts/index.js';
import type { Logger } from '../telemetry/index.js';
import { isRedisUnreachable } from '../telemetry/redis-link.js';

/** Unreadable runs remembered as already reported; past it the memory starts afresh. */
const UNREADABLE_REMEMBERED = 10_000;

/** Reports a sweep step that failed for one run; the pass goes on with the others. */
export type SweepErrorReporter = (runId: string, error: unknown, message: string) => void;

/**
 * A run whose record cannot be read is reported once per process, in one line
 * without a stack, and skipped on later passes: the record will not heal by itself, and a stack
 * every pass would drown every other line. Any other failure is a warning with its error.
 */
export function sweepErrorReporter(log: Logger): SweepErrorReporter {
  const reported = new Set<string>();
  return (runId, error, message) => {
    if (error instanceof ApiError && error.code === 'record_unreadable') {
      if (reported.has(runId)) return;
      if (reported.size >= UNREADABLE_REMEMBERED) reported.clear();
      reported.add(runId);
      log.error(
        { run_id: runId, code: error.code },
        `run record cannot be read; the sweeper skips it until an operator repairs or deletes it (${message})`,
      );
      return;
    }
    // An outage is logged once, by the link watch, not once per run a pass could not sweep.
    if (isRedisUnreachable(error)) return log.debug({ run_id: runId }, message);
    log.warn({ run_id: runId, err: error }, message);
  };
}
