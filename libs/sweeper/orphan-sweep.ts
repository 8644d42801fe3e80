import type { RunStatus, RunView } from '../contracts/index.js';

/** Runs looked at per pass, walking the index of runs not yet ended. */
export const ORPHAN_SWEEP_BATCH = 200;
/** A queued run younger than this is left to whoever queued it, who enqueues its job next. */
export const ORPHAN_GRACE_MS = 30_000;

export interface OrphanSweepDeps {
  store: {
    scanRunDeadlines(cursor: string, count: number): Promise<{ cursor: string; runIds: string[] }>;
    runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus }>>;
    getRun(runId: string): Promise<RunView | undefined>;
  };
  /** Whether BullMQ holds the job of this execution (in any state). */
  jobExists(runId: string, execution: number): Promise<boolean>;
  enqueue(run: RunView): Promise<unknown>;
  /** Where the walk over the index stopped ('0' starts a cycle). */
  cursor: string;
  batchSize?: number;
  graceMs?: number;
  clock?: () => number;
  onError?: (runId: string, error: unknown) => void;
}

/**
 * A run is stored `queued` before its job is added (DESIGN §4.1): an enqueuer that dies in between
 * — an API replica, a parent delegating, a resume — leaves a queued run no worker will ever claim.
 * This pass walks the runs not yet ended and adds the missing job of any run queued for longer than
 * the grace period. Adding is idempotent (the job id is the execution's), so a race adds nothing.
 */
export async function sweepQueuedWithoutJob(
  deps: OrphanSweepDeps,
): Promise<{ cursor: string; requeued: string[] }> {
  const now = (deps.clock ?? Date.now)();
  const grace = deps.graceMs ?? ORPHAN_GRACE_MS;
  const page = await deps.store.scanRunDeadlines(deps.cursor, deps.batchSize ?? ORPHAN_SWEEP_BATCH);
  const runIds = [...new Set(page.runIds)];
  const states = await deps.store.runStates(runIds);
  const requeued: string[] = [];
  for (const runId of runIds) {
    if (states.get(runId)?.status !== 'queued') continue;
    try {
      const run = await deps.store.getRun(runId);
      if (run?.status !== 'queued' || now - run.updated_at_ms < grace) continue;
      // A run waiting its turn on its profile has no job on purpose: the turn's pass wakes it.
      if (run.waiting_for === 'profile') continue;
      if (await deps.jobExists(run.id, run.execution)) continue;
      await deps.enqueue(run);
      requeued.push(run.id);
    } catch (error) {
      deps.onError?.(runId, error);
    }
  }
  return { cursor: page.cursor, requeued };
}
