import { Redis } from 'ioredis';
import { startBrowserWorker } from '../../apps/browser-worker/service.js';
import { loadConfig } from '../../libs/config/index.js';
import type { PageFactory, PageResult, PageSession } from '../../libs/lease/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { runLeaseUpkeep } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { leaseForRunningRun, TEST_SEAL_KEY, TEST_TOKEN, TestClock } from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession } from '../fixtures/run-store.js';
import { figure, report } from './report.js';

const SUITE = 'upkeep';
const MINUTE_MS = 60_000;
/** Setup calls (profile, run, claim, acquire per lease) in flight at once. */
const SETUP_CONCURRENCY = 64;

/** A page that is never there: the lease service's Redis and HTTP work is all that is left to time. */
class NoopPageSession implements PageSession {
  async navigate(): Promise<PageResult> {
    return { observation: null };
  }
  async observe(): Promise<PageResult> {
    return { observation: null };
  }
  async act(): Promise<PageResult> {
    return { observation: null };
  }
  async storageState(): Promise<unknown> {
    return { cookies: [], origins: [] };
  }
  async dispose(): Promise<void> {}
}

class NoopPageFactory implements PageFactory {
  #open = 0;
  async open(): Promise<PageSession> {
    this.#open += 1;
    const session = new NoopPageSession();
    const dispose = session.dispose.bind(session);
    session.dispose = async () => {
      this.#open -= 1;
      await dispose();
    };
    return session;
  }
  openContexts(): number {
    return this.#open;
  }
}

/**
 * Counts what this process sends to Redis, per client, by wrapping ioredis's `sendCommand` (every
 * command goes through it, pipelined ones too, with the pipeline's stand-in stream as second
 * argument). A round trip is a command sent on its own, or one pipeline (or MULTI) however many
 * commands it carries: ioredis writes a pipeline to the socket in one write and reads its replies
 * back together. Counting in-process rather than from `INFO commandstats` keeps other processes on
 * the same Redis (tests running beside the bench) out of the figure.
 */
function countRedisTraffic(passClient: Redis): {
  stop(): { pass: Traffic; service: Traffic };
} {
  const proto = Redis.prototype as unknown as {
    sendCommand: (
      this: Redis,
      command: unknown,
      stream?: { isPipeline?: boolean },
      ...rest: unknown[]
    ) => unknown;
  };
  const original = proto.sendCommand;
  const pass: Traffic = { commands: 0, roundTrips: 0 };
  const service: Traffic = { commands: 0, roundTrips: 0 };
  const pipelines = new WeakSet<object>();
  proto.sendCommand = function (this: Redis, command, stream, ...rest) {
    const bucket = this === passClient ? pass : service;
    bucket.commands += 1;
    if (!stream?.isPipeline) bucket.roundTrips += 1;
    else if (!pipelines.has(stream)) {
      pipelines.add(stream);
      bucket.roundTrips += 1;
    }
    return original.call(this, command, stream, ...rest);
  };
  return {
    stop() {
      proto.sendCommand = original;
      return { pass, service };
    },
  };
}

interface Traffic {
  commands: number;
  roundTrips: number;
}

/** Runs `count` tasks with at most `limit` in flight; the first failure fails the lot. */
async function inLanes(count: number, limit: number, task: (index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      const index = next;
      next += 1;
      await task(index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, count) }, lane));
}

interface UpkeepMeasure {
  ms: number;
  traffic: { pass: Traffic; service: Traffic };
}

/**
 * One upkeep pass over `count` held leases, every one due: a live browser worker (its page factory a
 * no-op one, so no browser context is made) on a clock that stands still until moved; `count`
 * profiles, each with a running run holding a lease acquired over the data plane; the clock moved
 * 11 minutes so each lease (granted 15 minutes) is 4 minutes from expiry, inside the 5-minute window.
 */
async function measureUpkeep(count: number): Promise<UpkeepMeasure> {
  const prefix = uniquePrefix(`bench-upkeep-${count}`);
  const clock = new TestClock();
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    BROWSER_WORKER_PORT: '0',
    BROWSER_WORKER_ID: 'bw-bench-upkeep',
    BROWSER_WORKER_PROFILES: '*',
    LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN,
    LEASEHOLD_SEAL_KEY: TEST_SEAL_KEY,
    // The worker's own background work (its expiry sweep reads every held lease, its heartbeat
    // writes its record) stays out of the pass: one heartbeat at start, no sweep while measured.
    LEASE_EXPIRY_SWEEP_INTERVAL_MS: String(60 * MINUTE_MS),
    BROWSER_WORKER_HEARTBEAT_MS: String(60 * MINUTE_MS),
    LOG_LEVEL: 'silent',
    ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
  });
  const handle = await startBrowserWorker({
    config,
    logger: silentLogger(),
    metrics: createMetrics(),
    redisUrl: testRedisUrl(),
    clock: clock.now,
    pages: () => new NoopPageFactory(),
  });
  const redis = new Redis(testRedisUrl());
  const passRedis = new Redis(testRedisUrl());
  try {
    const runs = new RunStore(redis, `${prefix}:`, clock.now);
    const dataPlane = new DataPlaneClient({ baseUrl: handle.url, token: TEST_TOKEN });
    const sessionId = await createTestSession(runs, 't1', { instructions: 'hold the page' });
    await inLanes(count, SETUP_CONCURRENCY, async (index) => {
      const profileId = `upkeep-${index}`;
      await leaseForRunningRun(dataPlane, runs, sessionId, profileId);
    });
    clock.advance(11 * MINUTE_MS);

    // The pass reads through a client of its own, so its round trips are told from the service's.
    await passRedis.ping();
    const deps = {
      leases: new RedisLeaseStore(passRedis, `${prefix}:`),
      runs: new RunStore(passRedis, `${prefix}:`, clock.now),
      workers: new BrowserWorkerRegistry(passRedis, `${prefix}:`),
      dataPlaneToken: TEST_TOKEN,
      clock: clock.now,
    };
    const counting = countRedisTraffic(passRedis);
    let traffic: UpkeepMeasure['traffic'] | undefined;
    const started = performance.now();
    const pass = await runLeaseUpkeep(deps).finally(() => {
      traffic = counting.stop();
    });
    const ms = performance.now() - started;
    if (!traffic) throw new Error('unreachable: the traffic count was stopped');
    if (pass.renewed.length !== count || pass.failed.length > 0) {
      console.error(
        `upkeep bench: at ${count} leases the pass renewed ${pass.renewed.length}, ` +
          `closed ${pass.closed.length}, kept ${pass.kept}, failed ${pass.failed.length}`,
      );
      process.exitCode = 1;
    }
    return { ms, traffic };
  } finally {
    await handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
    passRedis.disconnect();
  }
}

/**
 * `upkeep_1k_ms`, `upkeep_10k_ms`: one upkeep pass over 1,000 and 10,000 due leases (target under
 * 1,000 ms per 1,000; `upkeep_10k_ms` is printed beside `upkeep_1k_ms` × 10, so its ratio is the
 * linearity, ≤ 1.2 wanted). `redis_round_trips_per_lease`: at 10,000 leases, the round trips the
 * pass cost Redis, per lease: the pass's own reads (a few pipelines, whatever the count) plus the
 * lease service's, serving the renewals (see countRedisTraffic). The split is printed on stderr.
 */
export default async function upkeepBench(): Promise<void> {
  // A discarded pass first, so the 1,000 is not also paying for the JIT's first look at the
  // pass, the data-plane client and its HTTP pool (which would flatter the 10,000's linearity).
  await measureUpkeep(200);
  const small = await measureUpkeep(1_000);
  const large = await measureUpkeep(10_000);
  report(figure(SUITE, 'upkeep_1k_ms', small.ms));
  report(figure(SUITE, 'upkeep_10k_ms', large.ms, { metric: 'upkeep_1k_ms_x10', value: small.ms * 10 }));
  const { pass, service } = large.traffic;
  report(figure(SUITE, 'redis_round_trips_per_lease', (pass.roundTrips + service.roundTrips) / 10_000));
  console.error(
    `upkeep bench: at 10,000 leases the pass's own client made ${pass.roundTrips} round trips ` +
      `(${pass.commands} commands); the lease service ${service.roundTrips} round trips ` +
      `(${service.commands} commands)`,
  );
}
