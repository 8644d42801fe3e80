import { type RunStatus, type RunView, runHasEnded } from '../contracts/index.js';
import type { PersonDue } from './person-sweep.js';

/** Due deadline entries looked at per pass by default. */
export const DEADLINE_SWEEP_BATCH = 500;
/** Runs whose approvals are checked per pass by default. */
export const STALE_APPROVAL_SWEEP_BATCH = 200;

/** The store's side of the deadline sweep (the run store's methods of the same names). */
export interface DeadlineSweepStore {
  /** Index entries whose deadline has passed (by the store's clock), earliest first, at most `limit`. */
  listDueRunDeadlines(limit: number): Promise<Array<{ runId: string; deadlineAtMs: number }>>;
  getRun(runId: string): Promise<RunView | undefined>;
  failRun(
    runId: string,
    reason: 'deadline_exceeded',
    options: { expectedExecution: number; message: string },
  ): Promise<{ ok: true; run: RunView } | { ok: false }>;
  /** Re-scores an entry if it still carries `fromMs`; false when something newer was written. */
  moveRunDeadline(runId: string, fromMs: number, toMs: number): Promise<boolean>;
  /** Removes an entry if it still carries `atMs`. */
  removeRunDeadline(runId: string, atMs: number): Promise<boolean>;
  expireStaleApprovals(runId: string): Promise<{ expired: string[]; expiredWaitsMs?: number[] }>;
}

export interface DeadlineSweepDeps {
  store: DeadlineSweepStore;
  /**
   * Due entries looked at per pass. Default {@link DEADLINE_SWEEP_BATCH}. Too small and a burst
   * of expiries drains over many passes (each run failed late); too large and one pass holds the
   * sweeper lock for long.
   */
  batchSize?: number;
  /**
   * Called once for each run this sweep ends, with the failed run: its consequences (lease
   * release, a waiting parent, the end counted) are the run lifecycle's (`RunLifecycle.followUp`).
   */
  onRunEnded?: (run: RunView) => void | Promise<void>;
  /** A failure about one run (a read, the hook); the pass goes on with the others. */
  onError?: (runId: string, error: unknown) => void;
  /** Told how long each approval this sweep expired had waited (ms). */
  onApprovalsExpired?: (waitsMs: number[]) => void;
}

export interface DeadlineSweepOutcome {
  /** Runs failed `deadline_exceeded` by this pass. */
  failed: string[];
  /** Entries re-scored at the later deadline of a retried run. */
  rescheduled: string[];
  /** Entries removed: their run had ended, or was never written. */
  removed: string[];
}

/**
 * The deadline sweep (DESIGN §4): a run past its deadline that never reaches its loop's own check
 * — `queued`, `parked`, `waiting_*`, or `running` on a dead worker — is failed
 * `deadline_exceeded`, whoever owns it, and {@link DeadlineSweepDeps.onRunEnded} told (ADR-0127:
 * such a run never reaches a worker's end of execution, so its lease is released there). An
 * entry is settled against the run's record: a run ended or gone leaves the index (after its
 * approvals are settled, so none outlives its run as pending), a run retried since is
 * re-scored at its new deadline. Safe to repeat and to race with a retry: the fail names the
 * execution it read, and index changes apply only to the score read.
 */
export async function sweepDeadlines(deps: DeadlineSweepDeps): Promise<DeadlineSweepOutcome> {
  const { store } = deps;
  const outcome: DeadlineSweepOutcome = { failed: [], rescheduled: [], removed: [] };
  for (const { runId, deadlineAtMs } of await store.listDueRunDeadlines(
    deps.batchSize ?? DEADLINE_SWEEP_BATCH,
  )) {
    try {
      const run = await store.getRun(runId);
      if (!run || runHasEnded(run.status)) {
        await expireApprovals(deps, runId);
        if (await store.removeRunDeadline(runId, deadlineAtMs)) outcome.removed.push(runId);
        continue;
      }
      if (run.deadline_at_ms > deadlineAtMs) {
        if (await store.moveRunDeadline(runId, deadlineAtMs, run.deadline_at_ms)) {
          outcome.rescheduled.push(runId);
        }
        continue;
      }
      const failed = await store.failRun(runId, 'deadline_exceeded', {
        expectedExecution: run.execution,
        message: 'the run passed its deadline',
      });
      // Moved on since the read (re-queued, ended, retried): the entry stays and a later pass looks again.
      if (!failed.ok) continue;
      outcome.failed.push(runId);
      await tellRunEnded(deps, failed.run);
      await expireApprovals(deps, runId);
      await store.removeRunDeadline(runId, deadlineAtMs);
    } catch (error) {
      deps.onError?.(runId, error);
    }
  }
  return outcome;
}

/** Expires the run's pending approvals and tells how long each had waited. */
async function expireApprovals(deps: DeadlineSweepDeps, runId: string): Promise<void> {
  const { expiredWaitsMs = [] } = await deps.store.expireStaleApprovals(runId);
  if (expiredWaitsMs.length > 0) deps.onApprovalsExpired?.(expiredWaitsMs);
}

async function tellRunEnded(deps: DeadlineSweepDeps, run: RunView): Promise<void> {
  try {
    await deps.onRunEnded?.(run);
  } catch (error) {
    deps.onError?.(run.id, error);
  }
}

/** Where a stale-approval sweep stands: a ZSCAN cursor and the runs it returned not yet checked. */
export interface StaleApprovalCursor {
  readonly scan: string;
  readonly backlog: readonly string[];
}

export const STALE_APPROVAL_SWEEP_START: StaleApprovalCursor = Object.freeze({
  scan: '0',
  backlog: Object.freeze([]),
});

export interface StaleApprovalSweepDeps {
  store: {
    /** One ZSCAN step over the deadline index; cursor '0' starts and ends a cycle. */
    scanRunDeadlines(cursor: string, count: number): Promise<{ cursor: string; runIds: string[] }>;
    expireStaleApprovals(runId: string): Promise<{
      runStatus: RunStatus | undefined;
      expired: string[];
      expiredWaitsMs?: number[];
      personDue?: { kind: 'timeout' | 'handback'; approvalId: string; holder: string };
    }>;
  };
  /** Where the previous pass stopped; {@link STALE_APPROVAL_SWEEP_START} for the first. */
  cursor: StaleApprovalCursor;
  /** Runs checked per pass (one script each). Default {@link STALE_APPROVAL_SWEEP_BATCH}. */
  batchSize?: number;
  onError?: (runId: string, error: unknown) => void;
}

export interface StaleApprovalSweepOutcome {
  /** Pass it to the next sweep. */
  cursor: StaleApprovalCursor;
  /** Whether this pass finished a cycle over the whole index (the next one starts another). */
  cycleDone: boolean;
  /** Runs whose approvals were checked. */
  checked: number;
  /** Approvals moved `pending → expired`. */
  expired: string[];
  /** How long each of them had waited, from its request to its expiry (ms). */
  expiredWaitsMs: number[];
  /** Parked runs whose `person` approval is past its time (the caller settles them: person-sweep.ts). */
  personDue: PersonDue[];
}

/**
 * The stale-approval sweep (DESIGN §4.4): a pending approval whose run is no longer `parked` on it
 * (re-queued without a decision, ended, gone) is expired and leaves its tenant's pending list.
 * It walks the deadline index — every run not known to have ended — a batch of runs per pass, so
 * each is checked once per cycle; a run ended and removed by {@link sweepDeadlines} had its last
 * check there. At most `batchSize` runs per pass.
 */
export async function sweepStaleApprovals(deps: StaleApprovalSweepDeps): Promise<StaleApprovalSweepOutcome> {
  const batchSize = deps.batchSize ?? STALE_APPROVAL_SWEEP_BATCH;
  if (!Number.isInteger(batchSize) || batchSize < 1) {
    throw new RangeError(`batchSize: expected a positive integer, got ${batchSize}`);
  }
  let scan = deps.cursor.scan;
  const backlog = [...deps.cursor.backlog];
  if (backlog.length === 0) {
    const page = await deps.store.scanRunDeadlines(scan, batchSize);
    scan = page.cursor;
    // ZSCAN may answer a member twice in one cycle; once per page is enough.
    backlog.push(...new Set(page.runIds));
  }
  const batch = backlog.splice(0, batchSize);
  const expired: string[] = [];
  const expiredWaitsMs: number[] = [];
  const personDue: PersonDue[] = [];
  for (const runId of batch) {
    try {
      const stale = await deps.store.expireStaleApprovals(runId);
      expired.push(...stale.expired);
      expiredWaitsMs.push(...(stale.expiredWaitsMs ?? []));
      if (stale.personDue) personDue.push({ runId, ...stale.personDue });
    } catch (error) {
      deps.onError?.(runId, error);
    }
  }
  return {
    cursor: { scan, backlog },
    cycleDone: scan === '0' && backlog.length === 0,
    checked: batch.length,
    expired,
    expiredWaitsMs,
    personDue,
  };
}
