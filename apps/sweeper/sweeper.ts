import type { Config } from '../../libs/config/index.js';
import { IntervalTask } from '../../libs/lifecycle/index.js';
import { reclaimStalledRuns } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, LeaderLock, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import {
  Counter,
  Gauge,
  type Logger,
  type Metrics,
  type ReadinessCheck,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis, createRunsQueue } from '../../queues/index.js';

/** Failed jobs looked at per pass (newest first); a reclaimed run is refused on a second look. */
const RECLAIM_SCAN_JOBS = 199;

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
 * (`reclaimed`) and releases their leases.
 */
export async function startSweeper(options: SweeperOptions): Promise<SweeperHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'sweeper' });
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
        release: config.secrets.dataPlaneToken
          ? {
              leases: new RedisLeaseStore(redis, config.redis.keyPrefix),
              workers: registry,
              dataPlaneToken: config.secrets.dataPlaneToken,
            }
          : undefined,
        onError: (runId, error) =>
          log.warn({ run_id: runId, err: error }, 'lease release after reclaim failed'),
      });
      if (runs.length > 0) {
        reclaimedRuns.inc(runs.length);
        log.warn({ run_ids: runs }, 'runs reclaimed: their workers stalled past the retry limit');
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
