import { enqueueExecution, type RunsQueue, runJobPending } from '../../queues/index.js';
import type { ApprovalView, RunView } from '../contracts/index.js';
import type { RunLifecycle } from '../runtime/run-lifecycle.js';
import type { Counter, Logger } from '../telemetry/index.js';
import type { ArtifactSweep } from './artifact-sweep.js';
import {
  DEADLINE_SWEEP_BATCH,
  type DeadlineSweepStore,
  STALE_APPROVAL_SWEEP_BATCH,
  STALE_APPROVAL_SWEEP_START,
  type StaleApprovalCursor,
  type StaleApprovalSweepDeps,
  sweepDeadlines,
  sweepStaleApprovals,
} from './deadline-sweep.js';
import type { SweepErrorReporter } from './error-reporter.js';
import type { FailedJobWalk } from './failed-job-walk.js';
import { type OrphanSweepDeps, sweepQueuedWithoutJob } from './orphan-sweep.js';
import { type PersonDue, type PersonSweepDeps, settlePersonDue } from './person-sweep.js';
import { type ReclaimDeps, reclaimStalledRuns } from './reclaim.js';
import type { SweeperMetrics } from './sweeper-metrics.js';
import { adoptUnindexedLeases, type UpkeepFillDeps } from './upkeep-fill.js';
import { handOverOrphanedLeases, type UpkeepHandoverDeps } from './upkeep-handover.js';

/** The run store calls of every sweep (the run store fits). */
export type SweepStore = DeadlineSweepStore &
  StaleApprovalSweepDeps['store'] &
  OrphanSweepDeps['store'] &
  Pick<ReclaimDeps, 'failRun'> & {
    /** A run's approvals: those its fail expired are observed (approval wait). */
    listApprovals(runId: string): Promise<ApprovalView[]>;
  };

export interface SweepPassDeps {
  /** The sweeper's leader lock: only the replica holding it sweeps. */
  lock: { tryHold(): Promise<boolean> };
  store: SweepStore;
  queue: RunsQueue;
  /** Where every run a sweep ends is followed up (lease, parent, end counted). */
  lifecycle: Pick<RunLifecycle, 'followUp' | 'sweepFollowUps' | 'sweepTurns'>;
  failedJobs: FailedJobWalk;
  metrics: SweeperMetrics;
  log: Logger;
  reportError: SweepErrorReporter;
  /** Due deadline entries per pass (earliest first); the rest wait for the next pass. */
  deadlineBatch?: number;
  /** Runs whose pending approvals are checked per pass, walking the deadline index. */
  staleApprovalBatch?: number;
  /** Retention: deletes the artifacts of runs whose records expired, when due. */
  artifacts?: Pick<ArtifactSweep, 'sweepIfDue'>;
  /**
   * A person on a run's page: requests nobody took over fail `person_timeout`, takeovers past
   * their time are handed back. Absent, neither is settled.
   */
  person?: Pick<PersonSweepDeps, 'store' | 'pageControl' | 'metrics'>;
  /** The run workers' roster and upkeep index: a gone worker's leases go to a live one. Absent, they are left. */
  upkeep?: UpkeepHandoverDeps;
  /**
   * The upkeep index and every live lease: once per fleet, a live lease in no worker's index (one
   * acquired before the index) goes into a live worker's. Absent, none is adopted.
   */
  upkeepFill?: UpkeepFillDeps;
}

/**
 * One sweeper pass while holding the lock: reclaim (a page of the failed set), deadlines, stale
 * approvals, queued runs without a job. A run a sweep ends goes through the run lifecycle (issue
 * 12), which releases its lease, resumes a parent waiting on it and counts its end. The walks'
 * cursors live here; a new leader starts the in-memory ones afresh (the failed-job walk's is kept
 * in Redis).
 */
export class SweepPass {
  readonly #deps: SweepPassDeps;
  #orphanCursor = '0';
  #approvalCursor: StaleApprovalCursor = STALE_APPROVAL_SWEEP_START;
  #turnCursor = '0';

  constructor(deps: SweepPassDeps) {
    this.#deps = deps;
  }

  async run(): Promise<void> {
    const { lock, metrics } = this.#deps;
    const held = await lock.tryHold();
    metrics.active.set(held ? 1 : 0);
    if (!held) return;
    metrics.passes.inc();
    await this.#reclaim();
    await this.#deadlines();
    await this.#staleApprovals();
    await this.#orphans();
    await this.#followUps();
    await this.#upkeepHandover();
    await this.#upkeepFill();
    await this.#artifacts();
  }

  /** ADR-0127 d6: each gone run worker's leases into a live run worker's upkeep, once a pass. */
  async #upkeepHandover(): Promise<void> {
    const { upkeep, log } = this.#deps;
    if (!upkeep) return;
    try {
      const handover = await handOverOrphanedLeases(upkeep);
      for (const moved of handover.moved) log.warn(moved, "a gone run worker's leases went to a live one");
      if (handover.stranded.length > 0)
        log.warn(
          { workers: handover.stranded },
          "no run worker is alive to keep a gone one's leases up; they expire unless one starts",
        );
    } catch (error) {
      log.error({ err: error }, 'upkeep handover failed; it is tried again next pass');
    }
  }

  /**
   * ADR-0127 d6: the live leases no run worker keeps up go into a live one's index, once per fleet;
   * every later pass reads one marker and stops.
   */
  async #upkeepFill(): Promise<void> {
    const { upkeepFill, log } = this.#deps;
    if (!upkeepFill) return;
    try {
      const fill = await adoptUnindexedLeases(upkeepFill);
      if (fill.status === 'filled' && fill.adopted.length > 0)
        log.info(
          { leases: fill.adopted.length },
          'live leases no run worker kept up were adopted by live ones',
        );
    } catch (error) {
      log.error({ err: error }, 'upkeep index fill failed; it is tried again next pass');
    }
  }

  async #artifacts(): Promise<void> {
    const { artifacts, log } = this.#deps;
    if (!artifacts) return;
    try {
      const deleted = await artifacts.sweepIfDue();
      if (deleted.length > 0) log.info({ runs: deleted.length }, 'artifacts of expired runs deleted');
    } catch (error) {
      log.error({ err: error }, 'artifact sweep failed; it is tried again when next due');
    }
  }

  /**
   * Consequences at least once: what a process that died left undone after a
   * transition (the follow-up index), and a profile's line whose next run nobody woke.
   */
  async #followUps(): Promise<void> {
    const { lifecycle, log } = this.#deps;
    const done = await lifecycle.sweepFollowUps();
    if (done > 0) log.warn({ runs: done }, 'follow-ups a process left undone were carried out');
    const turns = await lifecycle.sweepTurns(this.#turnCursor);
    this.#turnCursor = turns.cursor;
    if (turns.woken > 0) log.warn({ runs: turns.woken }, 'runs waiting for their profile were woken');
  }

  /** Counts a run a sweep ended as soon as it ended, then follows it up through the lifecycle. */
  #ended(counter: Counter | undefined, what: string) {
    return async (run: RunView) => {
      counter?.inc();
      await this.#approvalsExpiredBy(run);
      try {
        await this.#deps.lifecycle.followUp(run, { ended: true });
      } catch (error) {
        this.#deps.reportError(run.id, error, `${what}: the run's follow-up failed`);
      }
    };
  }

  async #reclaim(): Promise<void> {
    const { store, failedJobs, metrics, log } = this.#deps;
    const page = await failedJobs.read();
    const runs = await reclaimStalledRuns({
      failedJobs: async () => page.jobs,
      failRun: (runId, reason, options) => store.failRun(runId, reason, options),
      onRunEnded: this.#ended(metrics.reclaimed, 'reclaim'),
    });
    // Only once every job of the page was handled: a pass that dies reads the page again.
    await failedJobs.commit(page);
    // One line per run, each with its run_id, as every line about a run carries it.
    for (const runId of runs)
      log.warn({ run_id: runId }, 'run reclaimed: its worker stalled past the retry limit');
  }

  async #deadlines(): Promise<void> {
    const { store, metrics, log, reportError } = this.#deps;
    const deadlines = await sweepDeadlines({
      store,
      batchSize: this.#deps.deadlineBatch ?? DEADLINE_SWEEP_BATCH,
      onRunEnded: this.#ended(metrics.deadlineExceeded, 'deadline sweep'),
      onApprovalsExpired: (waitsMs) => this.#approvalsExpired(waitsMs),
      onError: (runId, error) => reportError(runId, error, 'deadline sweep: a step for this run failed'),
    });
    for (const runId of deadlines.failed) log.warn({ run_id: runId }, 'run failed: past its deadline');
  }

  async #staleApprovals(): Promise<void> {
    const { store, metrics, log, reportError } = this.#deps;
    const approvals = await sweepStaleApprovals({
      store,
      cursor: this.#approvalCursor,
      batchSize: this.#deps.staleApprovalBatch ?? STALE_APPROVAL_SWEEP_BATCH,
      onError: (runId, error) => reportError(runId, error, 'stale approval sweep: run not checked'),
    });
    this.#approvalCursor = approvals.cursor;
    await this.#settlePersonDue(approvals.personDue);
    metrics.staleApprovals.inc(approvals.expired.length);
    this.#approvalsExpired(approvals.expiredWaitsMs);
    if (approvals.expired.length > 0) {
      log.info(
        { approval_ids: approvals.expired },
        'stale approvals expired: their runs are no longer parked',
      );
    }
  }

  async #settlePersonDue(due: readonly PersonDue[]): Promise<void> {
    const { person, log, reportError, lifecycle } = this.#deps;
    if (!person) return;
    for (const entry of due) {
      try {
        const settled = await settlePersonDue(
          {
            ...person,
            onRunEnded: this.#ended(undefined, 'person timeout'),
            onRunResumed: async (runId) => {
              const run = await person.store.getRun(runId);
              if (run) await lifecycle.followUp(run);
            },
          },
          entry,
        );
        if (settled === 'failed') log.warn({ run_id: entry.runId }, 'run failed: nobody took its page over');
        if (settled === 'resumed')
          log.info({ run_id: entry.runId }, 'a takeover reached its time limit; the run goes on');
      } catch (error) {
        reportError(entry.runId, error, 'person sweep: the run was not settled');
      }
    }
  }

  /**
   * A run this sweep failed expired its pending approvals in the same step (their
   * decision time is its end): each one's wait is observed.
   */
  async #approvalsExpiredBy(run: RunView): Promise<void> {
    const endedAtMs = run.ended_at_ms;
    if (endedAtMs === null) return;
    try {
      const expired = (await this.#deps.store.listApprovals(run.id)).filter(
        (approval) => approval.status === 'expired' && approval.decided_at_ms === endedAtMs,
      );
      this.#approvalsExpired(expired.map((approval) => endedAtMs - approval.created_at_ms));
    } catch (error) {
      this.#deps.reportError(run.id, error, 'approval wait: the run’s approvals could not be read');
    }
  }

  /** Each expired approval's wait, from its request to its expiry. */
  #approvalsExpired(waitsMs: readonly number[]): void {
    for (const waitMs of waitsMs)
      this.#deps.metrics.approvalWait.observe({ decision: 'expired' }, Math.max(0, waitMs) / 1000);
  }

  async #orphans(): Promise<void> {
    const { store, queue, metrics, log, reportError } = this.#deps;
    const orphans = await sweepQueuedWithoutJob({
      store,
      jobExists: (runId, execution) => runJobPending(queue, runId, execution),
      enqueue: (run) => enqueueExecution(queue, run),
      cursor: this.#orphanCursor,
      onError: (runId, error) => reportError(runId, error, 'orphan sweep: run not checked'),
    });
    this.#orphanCursor = orphans.cursor;
    metrics.requeued.inc(orphans.requeued.length);
    for (const runId of orphans.requeued) log.warn({ run_id: runId }, 'queued run had no job; enqueued it');
  }
}
