import type { LeaseReleaseDeps } from './lease-release.js';
import { releaseRunLease } from './lease-release.js';

/** BullMQ's reason for a job that stalled more often than the worker retry limit allows. */
export const STALLED_PAST_LIMIT = /stalled more than allowable limit/i;

export interface ReclaimDeps {
  /** Recently failed jobs of the runs queue: their data and BullMQ's failure reason. */
  failedJobs(): Promise<
    Array<{ data: { runId: string; execution: number }; failedReason: string | undefined }>
  >;
  failRun(
    runId: string,
    reason: 'reclaimed',
    options: { expectedExecution: number; message: string },
  ): Promise<{ ok: boolean }>;
  getRun(
    runId: string,
  ): Promise<{ id: string; tenant: string; browser_profile_id: string | null } | undefined>;
  release: LeaseReleaseDeps | undefined;
  onError?: (runId: string, error: unknown) => void;
}

/**
 * The reclaim sweep (DESIGN §4.6): a run whose job stalled past the worker retry limit is failed
 * `reclaimed` — only if it is still at that execution — and its lease released (ADR-0127: those
 * runs never reach a worker's end of execution). Safe to repeat: a run already ended is refused
 * by the store and nothing else happens. Returns the runs reclaimed by this pass.
 */
export async function reclaimStalledRuns(deps: ReclaimDeps): Promise<string[]> {
  const reclaimed: string[] = [];
  for (const job of await deps.failedJobs()) {
    if (!job.failedReason || !STALLED_PAST_LIMIT.test(job.failedReason)) continue;
    const { runId, execution } = job.data;
    const failed = await deps.failRun(runId, 'reclaimed', {
      expectedExecution: execution,
      message: 'its worker stopped answering more often than the worker retry limit allows',
    });
    if (!failed.ok) continue;
    reclaimed.push(runId);
    const run = await deps.getRun(runId);
    if (run && deps.release)
      await releaseRunLease(deps.release, run).catch((error: unknown) => deps.onError?.(runId, error));
  }
  return reclaimed;
}
