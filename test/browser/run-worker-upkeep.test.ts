import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RunWorkerHandle, startRunWorker } from '../../apps/run-worker/run-worker.js';
import { loadConfig } from '../../libs/config/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { LeaseUpkeepIndex, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { createRunsQueue, enqueueExecution, type RunsQueue } from '../../queues/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value) || Date.now() > deadline) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * ADR-0127 d6: "each run worker runs a lease upkeep … beside its claim loop." The real run worker
 * (`startRunWorker`), its upkeep shrunk to 200 ms, against a real lease service: while its claim
 * loop takes and finishes a run, its upkeep seals and closes the lease of another run it executed
 * that ended with its page still open — no tool call, no other process. A lease in another run
 * worker's index is that worker's to keep: this one never reads it.
 */
describe('the run worker’s upkeep timer', () => {
  const prefix = uniquePrefix('worker-upkeep');
  let browser: TestBrowserWorker;
  let redis: Redis;
  let store: RunStore;
  let leases: RedisLeaseStore;
  let queue: RunsQueue;
  let runWorker: RunWorkerHandle | undefined;

  beforeAll(async () => {
    browser = await startTestBrowserWorker({ prefix });
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    store = new RunStore(redis, `${prefix}:`);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
  });

  afterAll(async () => {
    await runWorker?.close();
    await queue?.obliterate({ force: true });
    await queue?.close();
    await browser?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis?.disconnect();
  });

  it('closes an ended run’s open lease on its own timer while the claim loop finishes another run', async () => {
    const admin = new DataPlaneClient({ baseUrl: browser.url, token: TEST_TOKEN });
    await admin.createProfile({
      id: 'kept-open',
      tenant: 't1',
      principal: 'alice',
      allowed_origins: ['http://127.0.0.1:1'],
    });
    await admin.createProfile({
      id: 'kept-elsewhere',
      tenant: 't1',
      principal: 'alice',
      allowed_origins: ['http://127.0.0.1:1'],
    });
    const sessionId = await createTestSession(store, 't1', { instructions: 'work' });
    /** A run that ended with its lease still open (cancelled while parked: no worker closed it). */
    const endedWithLease = async (profileId: string) => {
      const ended = (
        await store.submitRun({
          tenant: 't1',
          principal: 'alice',
          sessionId,
          input: 'x',
          limits: TEST_RUN_LIMITS,
          timeoutMs: 600_000,
        })
      ).run;
      ran(await store.claimRun(ended.id, 1, 'owner'));
      const { lease } = await admin.acquire(
        { tenant: 't1', id: profileId },
        {
          tenant: 't1',
          principal: 'alice',
          run_id: ended.id,
          attempt: 1,
          requested_expires_at_ms: ended.deadline_at_ms,
        },
        idemKey(),
      );
      ran(await store.finishRun(ended.id, 'owner', { status: 'succeeded', result: 'ok' }));
      return { runId: ended.id, lease };
    };
    const mine = await endedWithLease('kept-open');
    const elsewhere = await endedWithLease('kept-elsewhere');
    const lease = mine.lease;
    const index = new LeaseUpkeepIndex(redis, `${prefix}:`, leases);
    // Another run worker, alive, keeps the second lease: its own upkeep closes it, not this one's.
    await index.add('rw-elsewhere', elsewhere.runId, {
      profile: { tenant: 't1', id: 'kept-elsewhere' },
      leaseId: elsewhere.lease.lease_id,
    });

    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN,
      LEASE_UPKEEP_INTERVAL_MS: '200',
      LOG_LEVEL: 'silent',
    });
    const metrics = createMetrics({ role: 'run-worker' });
    runWorker = await startRunWorker({ config, logger: silentLogger(), metrics, redisUrl: testRedisUrl() });
    // The ended run was executed here: its lease is in this worker's upkeep index.
    await index.add(runWorker.workerId, mine.runId, {
      profile: { tenant: 't1', id: 'kept-open' },
      leaseId: lease.lease_id,
    });

    // The claim loop at work beside it: a scripted run, claimed and finished.
    const { run: claimedRun } = await store.submitRun({
      tenant: 't1',
      principal: 'alice',
      sessionId,
      input: { text: 'answer', script: { steps: [], answer: 'answered' } },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    await enqueueExecution(queue, claimedRun);
    const finished = await until(
      () => store.getRun(claimedRun.id),
      (run) => run?.status === 'succeeded',
      10_000,
    );
    expect(finished?.status).toBe('succeeded');

    const closed = await until(
      () => leases.getLease({ tenant: 't1', id: 'kept-open' }, lease.lease_id),
      (view) => view?.state === 'closed',
      5_000,
    );
    expect(closed).toMatchObject({ state: 'closed', sealed: true });
    // The pass that closed it is counted once it is done.
    const passes = await until(
      async () =>
        (await metrics.registry.getSingleMetric('leasehold_lease_upkeep_passes_total')?.get())?.values[0]
          ?.value ?? 0,
      (value) => value >= 1,
      2_000,
    );
    expect(passes).toBeGreaterThanOrEqual(1);
    // Passes after the close left the other worker's lease alone.
    const after = passes;
    await until(
      async () =>
        (await metrics.registry.getSingleMetric('leasehold_lease_upkeep_passes_total')?.get())?.values[0]
          ?.value ?? 0,
      (value) => value >= after + 2,
      5_000,
    );
    expect(
      (await leases.getLease({ tenant: 't1', id: 'kept-elsewhere' }, elsewhere.lease.lease_id))?.state,
    ).toBe('live');
  });
});
