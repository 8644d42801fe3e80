import type { Config } from '../../libs/config/index.js';
import { IntervalTask } from '../../libs/lifecycle/index.js';
import { LeaderLock } from '../../libs/store/index.js';
import {
  Counter,
  Gauge,
  type Logger,
  type Metrics,
  type ReadinessCheck,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';

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
 * It holds no lease. Failing reclaimed runs and releasing their leases, and expiring stale
 * approvals, are filled in by the runs issue; the pass and its lock are here.
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

  const task = new IntervalTask(
    'sweeper',
    config.sweeper.intervalMs,
    async () => {
      const held = await lock.tryHold();
      active.set(held ? 1 : 0);
      if (!held) return;
      passes.inc();
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
        await lock.release().catch((error: unknown) => log.warn({ err: error }, 'lock release failed'));
        active.set(0);
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
