import { randomUUID } from 'node:crypto';
import type { Worker } from 'bullmq';
import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { modelMetricsOf } from '../../libs/models/index.js';
import {
  drainBoundMs,
  type ExecutionDeps,
  executionsCounter,
  listenForCancels,
  runJobProcessor,
  startUpkeepTask,
} from '../../libs/run-worker/index.js';
import { fleetLifecycle, type LeaseUpkeepDeps } from '../../libs/runtime/index.js';
import { LeasePageControl } from '../../libs/runtime/lease-page-control.js';
import { scheduleJobProcessor } from '../../libs/schedules/fire.js';
import { IntervalTask } from '../../libs/shutdown/index.js';
import {
  BrowserWorkerRegistry,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
  RunWorkerRoster,
  ScheduleStore,
} from '../../libs/store/index.js';
import { McpTurns } from '../../libs/store/mcp-turns.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import type { Logger, Metrics, ReadinessCheck } from '../../libs/telemetry/index.js';
import { redisLink } from '../../libs/telemetry/redis-link.js';
import { startWebhookWorker } from '../../libs/webhooks/index.js';
import {
  closeRedis,
  closeWorker,
  connectRedis,
  createQueueWorker,
  createRunsQueue,
  JobLocks,
  type RedisTarget,
  RUNS_QUEUE,
  type RunJob,
  type RunJobResult,
} from '../../queues/index.js';
import { createSchedulesQueue, SCHEDULES_QUEUE, type ScheduleJob } from '../../queues/schedules.js';

export { drainBoundMs } from '../../libs/run-worker/index.js';

export interface RunWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
  /** The upkeep's windows and clock (ADR-0127 d5 figures by default); tests shrink them. */
  upkeep?: Pick<LeaseUpkeepDeps, 'windowMs' | 'stepMs' | 'lifetimeMs' | 'clock'>;
  /** Test-only: the executions' fault hook (see `ExecutionDeps.faults`). */
  faults?: ExecutionDeps['faults'];
}

export interface RunWorkerHandle {
  worker: Worker<RunJob, RunJobResult, string>;
  /** This process in the run workers' roster and upkeep index: a fresh id per start. */
  workerId: string;
  /** ADR-0127 d6: the lease upkeep, beside the claim loop. */
  upkeep: IntervalTask;
  readiness(): ReadinessCheck[];
  close(): Promise<void>;
}

/**
 * A run worker: claims `runs` jobs (claim → model ⇄ tools → park, wait or end) and runs the lease
 * upkeep once a minute beside its claim loop (ADR-0127 d6). The systems live in
 * `libs/run-worker`; this builds them over one Redis connection and starts and stops them.
 */
export async function startRunWorker(options: RunWorkerOptions): Promise<RunWorkerHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'run-worker' });
  // A production run worker without a token would run every browser task without a
  // browser; it refuses to start instead, unless LEASEHOLD_BROWSER_TOOLS=off says so on purpose.
  log[browserToolsState(config) === 'enabled' ? 'info' : 'warn'](browserToolsLine(config));

  redisLink.configure(config.redis.answerTimeoutMs);
  const redis = await connectRedis(options.redisUrl, 'worker', 'run-worker-store', { autoPipelining: true });
  const store = new RunStore(redis, config.redis.keyPrefix, { retentionMs: config.runRetentionMs });
  const cancels = await listenForCancels(redis, store.cancelChannel, log);
  const queue = createRunsQueue(redis, config.redis.queuePrefix);
  const leases = new RedisLeaseStore(redis, config.redis.keyPrefix);
  const registry = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  // ADR-0127 d6: this worker keeps up the leases of the runs it executes, and no others. Its
  // heartbeat tells the sweeper it is alive; once it lapses, its leases go to a live run worker.
  const workerId = `rw-${randomUUID()}`;
  const roster = new RunWorkerRoster(redis, config.redis.keyPrefix);
  const upkeepIndex = new LeaseUpkeepIndex(redis, config.redis.keyPrefix, leases);
  const heartbeatMs = runWorkerHeartbeatMs(config.runWorker.upkeepIntervalMs);
  const beat = () => roster.heartbeat(workerId, Date.now(), heartbeatMs * HEARTBEATS_TO_GONE);
  await beat();
  const heartbeat = new IntervalTask('run-worker-heartbeat', heartbeatMs, beat, log).start();
  // One lifecycle: every consequence of a transition this worker causes goes through it.
  const lifecycle = fleetLifecycle({
    redis,
    keyPrefix: config.redis.keyPrefix,
    store,
    queue,
    dataPlaneToken: config.secrets.dataPlaneToken,
    runEnded: (end) => metrics.runEnded(end),
    onError: (runId, error, what) => log.warn({ run_id: runId, err: error }, what),
  });

  // A stop: executions hand their runs back at their next call boundary, calls in flight run on.
  const stopping = new AbortController();
  // The runs' job locks as BullMQ renews them: a call goes out only on a lock that holds.
  const jobLocks = new JobLocks(config.runWorker.lockDurationMs);
  const processor = runJobProcessor({
    jobLocks,
    redisLink: redisLink.of([redis]),
    config,
    stopping: stopping.signal,
    store,
    transcripts: new RunTranscripts(redis, config.redis.keyPrefix),
    // Runs whose model is an MCP client take its calls from the API over the run's keys.
    mcpTurns: new McpTurns(redis, config.redis.keyPrefix),
    registry,
    profiles: leases,
    upkeep: { workerId, index: upkeepIndex },
    // A takeover asked of a running run hands its page over at the loop's next safe point.
    pageControl: new LeasePageControl({ leases, registry, token: config.secrets.dataPlaneToken }),
    lifecycle,
    logger: log,
    cancelsHeard: cancels.heard,
    executions: executionsCounter(metrics.registry),
    queueWait: metrics.of('runQueueWait'),
    modelMetrics: modelMetricsOf(metrics),
    ...(options.faults ? { faults: options.faults } : {}),
  });
  // The tenants' webhook deliveries are claimed beside the runs. Started first: once the
  // runs worker below claims, a stop must find every part of this role there to close.
  const webhooks = await startWebhookWorker({ config, redisUrl: options.redisUrl, redis, logger: log });
  // Schedules fire here, beside the runs they submit: any replica may take a fire and BullMQ's job
  // lock gives each to one, and a schedule fires only while something can run what it submits.
  const schedulesQueue = createSchedulesQueue(redis, config.redis.queuePrefix);
  const fires = metrics.of('scheduleFires');
  const schedules = await createQueueWorker<ScheduleJob, string>(
    SCHEDULES_QUEUE,
    scheduleJobProcessor({
      config,
      schedules: new ScheduleStore(redis, config.redis.keyPrefix),
      store,
      lifecycle,
      queue: schedulesQueue,
      counted: (outcome, by) => fires.inc({ outcome }, by),
      logger: log,
    }),
    {
      redisUrl: options.redisUrl,
      prefix: config.redis.queuePrefix,
      concurrency: 4,
      lockDurationMs: config.runWorker.lockDurationMs,
      stalledIntervalMs: config.runWorker.stalledIntervalMs,
      maxStalledCount: config.runWorker.maxStalledCount,
      logger: log,
    },
  );
  const worker = await createQueueWorker<RunJob, RunJobResult>(RUNS_QUEUE, processor, {
    redisUrl: options.redisUrl,
    prefix: config.redis.queuePrefix,
    concurrency: config.runWorker.concurrency,
    lockDurationMs: config.runWorker.lockDurationMs,
    stalledIntervalMs: config.runWorker.stalledIntervalMs,
    maxStalledCount: config.runWorker.maxStalledCount,
    logger: log,
    locks: jobLocks,
  });
  const upkeep = startUpkeepTask({
    leases: upkeepIndex.forWorker(workerId),
    runs: store,
    workers: registry,
    config,
    metrics,
    logger: log,
    timings: options.upkeep,
  });

  let closing: Promise<void> | undefined;
  return {
    worker,
    workerId,
    upkeep,
    readiness: () => [{ name: 'run_worker', check: async () => worker.isRunning() && !worker.closing }],
    close() {
      closing ??= (async () => {
        // Stop claiming; each execution hands its run back once the call it has in flight has
        // answered, and one still unanswered at the drain bound goes to the run's next owner with
        // its lease. Then stop the upkeep: leases of runs handed back are kept for their next owner.
        stopping.abort();
        const [outcome] = await Promise.all([
          closeWorker(worker, drainBoundMs(config.shutdownTimeoutMs)),
          closeWorker(webhooks, drainBoundMs(config.shutdownTimeoutMs)),
          closeWorker(schedules, drainBoundMs(config.shutdownTimeoutMs)),
        ]);
        log.info({ outcome }, 'claim loop stopped');
        await upkeep.close();
        // Gone at once: the leases of its parked runs go to a live run worker on the next sweep.
        await heartbeat.close();
        await roster
          .leave(workerId)
          .catch((error: unknown) => log.warn({ err: error }, 'roster leave failed'));
        cancels.close();
        await queue.close();
        await schedulesQueue.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}

/** Heartbeats a run worker may miss before the sweeper counts it gone. */
const HEARTBEATS_TO_GONE = 3;

/** A heartbeat at least four times an upkeep interval, and never rarer than every 15 s. */
export function runWorkerHeartbeatMs(upkeepIntervalMs: number): number {
  return Math.max(100, Math.min(15_000, Math.floor(upkeepIntervalMs / 4)));
}
