import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { ApiError } from '../../libs/contracts/index.js';
import { IntervalTask } from '../../libs/lifecycle/index.js';
import {
  type LeaseReleaseDeps,
  type ParentResumeDeps,
  reclaimStalledRuns,
  resumeParentOf,
  STALE_APPROVAL_SWEEP_START,
  type StaleApprovalCursor,
  sweepDeadlines,
  sweepQueuedWithoutJob,
  sweepStaleApprovals,
} from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, LeaderLock, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import {
  Counter,
  Gauge,
  type Logger,
  type Metrics,
  type ReadinessCheck,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis, createRunsQueue, enqueueExecution, runJobId } from '../../queues/index.js';

/** Failed jobs looked at per pass (newest first); a reclaimed run is refused on a second look. */
const RECLAIM_SCAN_JOBS = 199;
/** Due deadline entries looked at per pass (earliest first); the rest wait for the next pass. */
const DEADLINE_SWEEP_BATCH = 500;
/** Runs whose pending approvals are checked per pass, walking the deadline index. */
const STALE_APPROVAL_SWEEP_BATCH = 200;
/** Unreadable runs remembered as already reported; past it the memory starts afresh. */
const UNREADABLE_REMEMBERED = 10_000;

/**
 * Reports a sweep step that failed for a run. A run whose record cannot be read (issue 11.4) is
 * reported once per process, in one line without a stack, and skipped on later passes: the
 * record will not heal by itself, and a stack every pass would drown every other line.
 */
function sweepErrorReporter(log: Logger) {
  const reported = new Set<string>();
  return (runId: string, error: unknown, message: string) => {
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
    log.warn({ run_id: runId, err: error }, message);
  };
}

export interface SweeperOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
}

export interface SweeperHandle {
  lock: LeaderLock;
  task: IntervalTask;
  readiness(): ReadinessCheck[];
  close(): Promise<void>;
}

/**
 * The maintenance role: one active replica (a Redis leader lock) passes every `SWEEP_INTERVAL_MS`.
 * It holds no lease of its own: it fails runs whose workers stalled past the retry limit
 * (`reclaimed`) and runs past their deadline (`deadline_exceeded`), releases their leases, and
 * expires approvals left pending under runs no longer parked on them.
 */
export async function startSweeper(options: SweeperOptions): Promise<SweeperHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'sweeper' });
  // Issue 11.13: without a token (and browser tools not off) a production sweeper would never
  // release a lease; it refuses to start instead.
  const browserTools = browserToolsState(config);
  log[browserTools === 'enabled' ? 'info' : 'warn'](browserToolsLine(config));
  const reportError = sweepErrorReporter(log);
  const redis = await connectRedis(options.redisUrl, 'worker', 'sweeper');
  // The lock outlives three missed passes, so a slow pass never hands it over by accident.
  const lock = new LeaderLock(redis, `${config.redis.keyPrefix}sweeper:lock`, config.sweeper.intervalMs * 3);
  const active = new Gauge({
    name: 'leasehold_sweeper_active',
    help: '1 while this process holds the sweeper lock.',
    registers: [metrics.registry],
  });
  const passes = new Counter({
    name: 'leasehold_sweeper_passes_total',
    help: 'Sweeper passes run while holding the lock.',
    registers: [metrics.registry],
  });

  const store = new RunStore(redis, config.redis.keyPrefix);
  const registry = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  const queue = createRunsQueue(redis, config.redis.queuePrefix);
  const reclaimedRuns = new Counter({
    name: 'leasehold_runs_reclaimed_total',
    help: 'Runs failed `reclaimed` because their workers stalled past the retry limit.',
    registers: [metrics.registry],
  });
  const deadlineExceededRuns = new Counter({
    name: 'leasehold_runs_deadline_exceeded_total',
    help: 'Runs failed `deadline_exceeded` by the sweeper: past their deadline without reaching their own check.',
    registers: [metrics.registry],
  });
  const staleApprovals = new Counter({
    name: 'leasehold_approvals_stale_expired_total',
    help: 'Pending approvals expired by the sweeper because their run was no longer parked on them.',
    registers: [metrics.registry],
  });
  const release: LeaseReleaseDeps | undefined = config.secrets.dataPlaneToken
    ? {
        leases: new RedisLeaseStore(redis, config.redis.keyPrefix),
        workers: registry,
        dataPlaneToken: config.secrets.dataPlaneToken,
      }
    : undefined;
  // A run this sweeper ends may be a child its parent waits on: the parent resumes with that end.
  const parents: ParentResumeDeps = { store, enqueue: (run) => enqueueExecution(queue, run) };
  const resumeParent = async (runId: string) => {
    const run = await store.getRun(runId);
    if (run) await resumeParentOf(parents, run);
  };
  const requeuedRuns = new Counter({
    name: 'leasehold_runs_requeued_total',
    help: 'Queued runs whose job was missing (their enqueuer died before adding it), enqueued by the sweeper.',
    registers: [metrics.registry],
  });
  // Where the walk for queued runs without a job stopped.
  let orphanCursor = '0';
  // Where the stale-approval walk over the deadline index stopped; a new leader starts a cycle afresh.
  let approvalCursor: StaleApprovalCursor = STALE_APPROVAL_SWEEP_START;

  const task = new IntervalTask(
    'sweeper',
    config.sweeper.intervalMs,
    async () => {
      const held = await lock.tryHold();
      active.set(held ? 1 : 0);
      if (!held) return;
      passes.inc();
      const runs = await reclaimStalledRuns({
        failedJobs: async () =>
          (await queue.getFailed(0, RECLAIM_SCAN_JOBS)).map((job) => ({
            data: job.data,
            failedReason: job.failedReason,
          })),
        failRun: (runId, reason, failOptions) => store.failRun(runId, reason, failOptions),
        getRun: (runId) => store.getRun(runId),
        release,
        onError: (runId, error) => reportError(runId, error, 'lease release after reclaim failed'),
      });
      if (runs.length > 0) {
        reclaimedRuns.inc(runs.length);
        metrics.runEnded('failed', 'reclaimed', runs.length);
        log.warn({ run_ids: runs }, 'runs reclaimed: their workers stalled past the retry limit');
        for (const runId of runs) await resumeParent(runId);
      }

      const deadlines = await sweepDeadlines({
        store,
        release,
        batchSize: DEADLINE_SWEEP_BATCH,
        onRunEnded: async (run) => {
          await resumeParentOf(parents, run);
        },
        onError: (runId, error) => reportError(runId, error, 'deadline sweep: a step for this run failed'),
      });
      deadlineExceededRuns.inc(deadlines.failed.length);
      metrics.runEnded('failed', 'deadline_exceeded', deadlines.failed.length);
      for (const runId of deadlines.failed) log.warn({ run_id: runId }, 'run failed: past its deadline');

      const approvals = await sweepStaleApprovals({
        store,
        cursor: approvalCursor,
        batchSize: STALE_APPROVAL_SWEEP_BATCH,
        onError: (runId, error) => reportError(runId, error, 'stale approval sweep: run not checked'),
      });
      approvalCursor = approvals.cursor;

      const orphans = await sweepQueuedWithoutJob({
        store,
        jobExists: async (runId, execution) => (await queue.getJob(runJobId(runId, execution))) !== undefined,
        enqueue: (run) => enqueueExecution(queue, run),
        cursor: orphanCursor,
        onError: (runId, error) => reportError(runId, error, 'orphan sweep: run not checked'),
      });
      orphanCursor = orphans.cursor;
      requeuedRuns.inc(orphans.requeued.length);
      for (const runId of orphans.requeued) log.warn({ run_id: runId }, 'queued run had no job; enqueued it');
      staleApprovals.inc(approvals.expired.length);
      if (approvals.expired.length > 0) {
        log.info(
          { approval_ids: approvals.expired },
          'stale approvals expired: their runs are no longer parked',
        );
      }
    },
    log,
  ).start({ runNow: true });

  let closing: Promise<void> | undefined;
  return {
    lock,
    task,
    readiness: () => [{ name: 'sweeper_redis', check: async () => (await redis.ping()) === 'PONG' }],
    close() {
      closing ??= (async () => {
        await task.close();
        await queue.close();
        await lock.release().catch((error: unknown) => log.warn({ err: error }, 'lock release failed'));
        active.set(0);
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
