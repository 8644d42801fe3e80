import { type ChildProcess, spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { Redis } from 'ioredis';
import { startBrowserWorker } from '../../apps/browser-worker/service.js';
import { runWorkerHeartbeatMs } from '../../apps/run-worker/run-worker.js';
import { loadConfig } from '../../libs/config/index.js';
import {
  DEFAULT_LEASE_CAPS,
  type PageFactory,
  type PageResult,
  type PageSession,
} from '../../libs/lease/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { runLeaseUpkeep } from '../../libs/runtime/index.js';
import {
  BrowserWorkerRegistry,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
  RunWorkerRoster,
} from '../../libs/store/index.js';
import { handOverOrphanedLeases } from '../../libs/sweeper/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { leaseForRunningRun, TEST_SEAL_KEY, TEST_TOKEN, TestClock } from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';
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

/** Run workers and leases of the fleet simulated for the commands-per-minute figure. */
const FLEET_WORKERS = 100;
const FLEET_LEASES = 10_000;
/** Simulated minutes: a lease granted 15 minutes is renewed once in ten (at 5 minutes from expiry). */
const FLEET_MINUTES = 10;
/** The sweeper's default pass interval (SWEEP_INTERVAL_MS): its handover step reads the roster each pass. */
const SWEEPS_PER_MINUTE = 12;

/** A free TCP port on 127.0.0.1, for a private redis-server. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/**
 * A redis-server of the bench's own: its `INFO commandstats` counts this bench and nothing else (the
 * shared Redis serves other tests meanwhile). No persistence: it is thrown away after.
 */
async function startPrivateRedis(): Promise<{ url: string; stop(): Promise<void> }> {
  const port = await freePort();
  const child: ChildProcess = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    { stdio: 'ignore' },
  );
  const url = `redis://127.0.0.1:${port}`;
  const probe = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
  // Refused until the server listens: the loop below asks again.
  probe.on('error', () => undefined);
  for (let tries = 0; ; tries += 1) {
    try {
      await probe.connect().catch(() => undefined);
      if ((await probe.ping()) === 'PONG') break;
    } catch (error) {
      if (tries > 100) throw error;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  probe.disconnect();
  return {
    url,
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

/**
 * Every command Redis ran since it started, from `INFO commandstats`: those sent, and those a script
 * ran (a script's own calls are counted, so a renewal script is more than one). INFO itself is left out.
 */
async function commandsRun(redis: Redis): Promise<number> {
  const stats = await redis.info('commandstats');
  let total = 0;
  for (const match of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm))
    if (match[1] !== 'info') total += Number(match[2]);
  return total;
}

interface FleetMeasure {
  /** Commands per simulated minute, each minute of the window (the tenth renews every lease). */
  perMinute: number[];
  /** One pass of the listing upkeep (every live lease, every run), with nothing due. */
  listingPass: number;
  renewed: number;
}

/**
 * A fleet of {@link FLEET_WORKERS} run workers keeping {@link FLEET_LEASES} leases up, on a private
 * Redis with a live browser worker (no-op pages) serving the renewals. The leases are spread over
 * the workers' upkeep indexes as their acquisitions would put them. Then, each simulated minute,
 * every worker beats its heartbeat (4 a minute) and runs one upkeep pass over its own index, and
 * the sweeper's handover step runs as often as its passes do; the minute's commands are counted.
 * Beside it, one pass of the listing upkeep (what each run worker ran before, over every lease).
 */
async function measureFleetUpkeep(): Promise<FleetMeasure> {
  const privateRedis = await startPrivateRedis();
  const prefix = uniquePrefix('bench-upkeep-fleet');
  const clock = new TestClock();
  const config = loadConfig({
    REDIS_URL: privateRedis.url,
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    BROWSER_WORKER_PORT: '0',
    BROWSER_WORKER_ID: 'bw-bench-fleet',
    BROWSER_WORKER_PROFILES: '*',
    LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN,
    LEASEHOLD_SEAL_KEY: TEST_SEAL_KEY,
    // Commands are counted here, not time: a loaded machine's slow answers must not close the gate.
    REDIS_ANSWER_TIMEOUT_MS: '30000',
    // The browser worker's own background work stays out of the window (as in measureUpkeep).
    LEASE_EXPIRY_SWEEP_INTERVAL_MS: String(60 * MINUTE_MS),
    BROWSER_WORKER_HEARTBEAT_MS: String(60 * MINUTE_MS),
    LOG_LEVEL: 'silent',
    ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
  });
  const handle = await startBrowserWorker({
    config,
    logger: silentLogger(),
    metrics: createMetrics(),
    redisUrl: privateRedis.url,
    clock: clock.now,
    pages: () => new NoopPageFactory(),
  });
  const redis = new Redis(privateRedis.url);
  try {
    const runs = new RunStore(redis, `${prefix}:`, clock.now);
    const leases = new RedisLeaseStore(redis, `${prefix}:`);
    const index = new LeaseUpkeepIndex(redis, `${prefix}:`, leases);
    const roster = new RunWorkerRoster(redis, `${prefix}:`);
    const registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    const sessionId = await createTestSession(runs, 't1', { instructions: 'hold the page' });
    const workers = Array.from({ length: FLEET_WORKERS }, (_, n) => `rw-bench-${n}`);
    // Written to the store as the lease service writes them (no HTTP: the setup is not measured,
    // and 10,000 data-plane acquires on a loaded machine take minutes), served by the live worker.
    await inLanes(FLEET_LEASES, SETUP_CONCURRENCY, async (n) => {
      const profile = { tenant: 't1', id: `fleet-${n}` };
      await leases.createProfile(
        {
          ...profile,
          principal: 'alice',
          allowed_origins: ['http://127.0.0.1:1'],
          frame_origins: [],
          subresources: 'any',
          protected: false,
        },
        clock.now(),
      );
      const { run } = await runs.submitRun({
        tenant: 't1',
        principal: 'alice',
        sessionId,
        input: 'x',
        limits: TEST_RUN_LIMITS,
        timeoutMs: 3 * 60 * MINUTE_MS,
      });
      ran(await runs.claimRun(run.id, 1, 'owner'));
      const leaseId = `lse_fleet${String(n).padStart(12, '0')}`;
      const acquired = await leases.acquire({
        profile,
        newLeaseId: leaseId,
        scope: { tenant: 't1', principal: 'alice', run_id: run.id, attempt: 1 },
        providerRef: 'bw-bench-fleet',
        requestedExpiresAtMs: run.deadline_at_ms,
        nowMs: clock.now(),
        caps: DEFAULT_LEASE_CAPS,
      });
      if (acquired.status !== 'created') throw new Error(`upkeep bench: acquire answered ${acquired.status}`);
      await index.add(workers[n % FLEET_WORKERS] as string, run.id, { profile, leaseId });
    });

    const beatsPerMinute = MINUTE_MS / runWorkerHeartbeatMs(MINUTE_MS);
    const beatTtl = 3 * runWorkerHeartbeatMs(MINUTE_MS);
    const upkeepDeps = { runs, workers: registry, dataPlaneToken: TEST_TOKEN, clock: clock.now };
    let renewed = 0;

    // The listing upkeep, one pass a minute in before anything is due: what every worker read.
    clock.advance(MINUTE_MS / 2);
    const beforeListing = await commandsRun(redis);
    const listing = await runLeaseUpkeep({ leases, ...upkeepDeps });
    const listingPass = (await commandsRun(redis)) - beforeListing;
    if (listing.renewed.length + listing.closed.length + listing.failed.length > 0)
      throw new Error('upkeep bench: the listing pass was meant to find nothing due');

    const perMinute: number[] = [];
    clock.advance(MINUTE_MS / 2);
    for (let minute = 1; minute <= FLEET_MINUTES; minute += 1) {
      clock.advance(MINUTE_MS);
      const before = await commandsRun(redis);
      for (let beat = 0; beat < beatsPerMinute; beat += 1)
        await Promise.all(workers.map((id) => roster.heartbeat(id, clock.now(), beatTtl)));
      for (let sweep = 0; sweep < SWEEPS_PER_MINUTE; sweep += 1)
        await handOverOrphanedLeases({ roster, index });
      await inLanes(workers.length, 8, async (n) => {
        const pass = await runLeaseUpkeep({ leases: index.forWorker(workers[n] as string), ...upkeepDeps });
        renewed += pass.renewed.length;
        if (pass.failed.length > 0 || pass.closed.length > 0)
          throw new Error(`upkeep bench: a pass failed ${pass.failed.length}, closed ${pass.closed.length}`);
      });
      // The INFO call itself is left out of the count (commandsRun).
      perMinute.push((await commandsRun(redis)) - before);
    }
    return { perMinute, listingPass, renewed };
  } finally {
    await handle.close();
    redis.disconnect();
    await privateRedis.stop();
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
  await fleetFigures();
  if (process.env.UPKEEP_BENCH_FLEET_ONLY === '1') return;
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

/**
 * `upkeep_commands_per_minute`: a fleet of 100 run workers keeping 10,000 leases up, the Redis
 * commands of one minute averaged over ten (each lease is renewed once in ten minutes): the
 * workers' passes over their own indexes, the lease service's renewals, the workers' heartbeats and
 * the sweeper's handover step. Beside it, the listing upkeep's figure from the same run: 100 workers
 * each reading every lease and run once a minute, plus the same renewals counted once (the least it
 * cost: with every worker renewing, each renewal was asked up to 100 times). Target: at most 3
 * commands per live lease per minute (`upkeep_commands_per_lease_minute`).
 */
async function fleetFigures(): Promise<void> {
  const fleet = await measureFleetUpkeep();
  const total = fleet.perMinute.reduce((sum, n) => sum + n, 0);
  const perMinute = total / FLEET_MINUTES;
  // The renewals' share of a minute: what the window cost beyond ten quiet minutes, over ten.
  const quiet = Math.min(...fleet.perMinute);
  const renewalsPerMinute = (total - quiet * FLEET_MINUTES) / FLEET_MINUTES;
  const listingPerMinute = FLEET_WORKERS * fleet.listingPass + renewalsPerMinute;
  report(
    figure(SUITE, 'upkeep_commands_per_minute', perMinute, {
      metric: 'listing_upkeep_commands_per_minute',
      value: listingPerMinute,
    }),
  );
  report(figure(SUITE, 'upkeep_commands_per_lease_minute', perMinute / FLEET_LEASES));
  console.error(
    `upkeep bench: ${FLEET_WORKERS} run workers, ${FLEET_LEASES} leases, ${FLEET_MINUTES} minutes: ` +
      `${fleet.renewed} renewals; commands per minute ${fleet.perMinute.join(', ')}; ` +
      `one listing pass ${fleet.listingPass} commands`,
  );
}
