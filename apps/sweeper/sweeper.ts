import { type ArtifactStore, openArtifactStore } from '../../libs/artifacts/index.js';
import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { fleetLifecycle } from '../../libs/runtime/index.js';
import { LeasePageControl } from '../../libs/runtime/lease-page-control.js';
import { IntervalTask } from '../../libs/shutdown/index.js';
import {
  BrowserWorkerRegistry,
  LeaderLock,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
  RunWorkerRoster,
  ScheduleStore,
} from '../../libs/store/index.js';
import {
  ArtifactSweep,
  createSweeperMetrics,
  FailedJobWalk,
  SweepPass,
  sweepErrorReporter,
} from '../../libs/sweeper/index.js';
import type { Logger, Metrics, ReadinessCheck } from '../../libs/telemetry/index.js';
import { redisLink } from '../../libs/telemetry/redis-link.js';
import { closeRedis, connectRedis, createRunsQueue, type RedisTarget } from '../../queues/index.js';

export interface SweeperOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
  /** The store whose orphaned artifacts are swept; unset: opened from config. */
  artifacts?: ArtifactStore;
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
 * (`reclaimed`) and runs past their deadline (`deadline_exceeded`), and the run lifecycle
 * releases their leases; it expires approvals left pending under runs no longer parked on them,
 * and enqueues queued runs whose job is missing (libs/sweeper).
 */
export async function startSweeper(options: SweeperOptions): Promise<SweeperHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'sweeper' });
  // Without a token (and browser tools not off) a production sweeper would never
  // release a lease; it refuses to start instead.
  const browserTools = browserToolsState(config);
  log[browserTools === 'enabled' ? 'info' : 'warn'](browserToolsLine(config));
  const reportError = sweepErrorReporter(log);
  redisLink.configure(config.redis.answerTimeoutMs);
  const redis = await connectRedis(options.redisUrl, 'worker', 'sweeper');
  const prefix = config.redis.keyPrefix;
  // The lock outlives three missed passes, so a slow pass never hands it over by accident.
  const lock = new LeaderLock(redis, `${prefix}sweeper:lock`, config.sweeper.intervalMs * 3);
  const store = new RunStore(redis, prefix, { retentionMs: config.runRetentionMs });
  const queue = createRunsQueue(redis, config.redis.queuePrefix);
  const lifecycle = fleetLifecycle({
    redis,
    keyPrefix: prefix,
    store,
    queue,
    dataPlaneToken: config.secrets.dataPlaneToken,
    runEnded: (end) => metrics.runEnded(end),
    onError: reportError,
  });
  const sweeperMetrics = createSweeperMetrics(metrics.registry);
  const leases = new RedisLeaseStore(redis, prefix);
  const roster = new RunWorkerRoster(redis, prefix);
  const upkeepIndex = new LeaseUpkeepIndex(redis, prefix, leases);
  const pass = new SweepPass({
    lock,
    store,
    queue,
    lifecycle,
    failedJobs: new FailedJobWalk({ queue, redis, cursorKey: `${prefix}sweeper:reclaim-cursor` }),
    metrics: sweeperMetrics,
    log,
    reportError,
    // A request for a person nobody answered fails the run; a takeover past its time is handed back.
    person: {
      store,
      pageControl: new LeasePageControl({
        leases,
        registry: new BrowserWorkerRegistry(redis, prefix),
        token: config.secrets.dataPlaneToken,
      }),
      metrics,
    },
    // The leases a gone run worker kept up go to a live one; the sweeper renews none itself.
    upkeep: { roster, index: upkeepIndex },
    // Once per fleet: live leases acquired before the per-worker index go into a live worker's.
    upkeepFill: { roster, index: upkeepIndex, leases },
    // The artifacts of runs whose records expired, in the store every role shares.
    artifacts: new ArtifactSweep({
      artifacts: options.artifacts ?? (await openArtifactStore(config)),
      store,
      schedules: new ScheduleStore(redis, prefix),
    }),
  });
  const task = new IntervalTask('sweeper', config.sweeper.intervalMs, () => pass.run(), log).start({
    runNow: true,
  });

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
        sweeperMetrics.active.set(0);
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
