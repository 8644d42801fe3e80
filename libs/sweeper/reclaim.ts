import type { RunView } from '../contracts/index.js';

/** BullMQ's reason for a job that stalled more often than the worker retry limit allows. */
export const STALLED_PAST_LIMIT = /stalled more than allowable limit/i;

export interface ReclaimDeps {
  /**
   * The failed jobs of the runs queue to look at in this pass: their data and BullMQ's failure
   * reason. Data that is not a run execution's (undefined) is skipped.
   */
  failedJobs(): Promise<
    ReadonlyArray<{
      data: { runId: string; execution: number } | undefined;
      failedReason: string | undefined;
    }>
  >;
  failRun(
    runId: string,
    reason: 'reclaimed',
    options: { expectedExecution: number; message: string },
  ): Promise<{ ok: true; run: RunView } | { ok: false }>;
  /**
   * Called once for each run this sweep ends, with the failed run: its consequences (lease
   * release, a waiting parent, the end counted) are the run lifecycle's (`RunLifecycle.followUp`).
   */
  onRunEnded?: (run: RunView) => void | Promise<void>;
  /** A failure of {@link onRunEnded} for one run; the pass goes on with the others. */
  onError?: (runId: string, error: unknown) => void;
}

/**
 * The reclaim sweep (DESIGN §4.6): a run whose job stalled past the worker retry limit is failed
 * `reclaimed` — only if it is still at that execution — and {@link ReclaimDeps.onRunEnded} told
 * (ADR-0127: those runs never reach a worker's end of execution, so their lease is released
 * there). Jobs that failed any other way (a failed run's job fails on purpose) are not
 * reclaim's. Safe to repeat: a run already ended is refused by the store and nothing else
 * happens. Returns the runs reclaimed by this pass.
 */
export async function reclaimStalledRuns(deps: ReclaimDeps): Promise<string[]> {
  const reclaimed: string[] = [];
  for (const job of await deps.failedJobs()) {
    if (!job.data || !job.failedReason || !STALLED_PAST_LIMIT.test(job.failedReason)) continue;
    const { runId, execution } = job.data;
    const failed = await deps.failRun(runId, 'reclaimed', {
      expectedExecution: execution,
      message: 'its worker stopped answering more often than the worker retry limit allows',
    });
    if (!failed.ok) continue;
    reclaimed.push(runId);
    try {
      await deps.onRunEnded?.(failed.run);
    } catch (error) {
      deps.onError?.(runId, error);
    }
  }
  return reclaimed;
}
