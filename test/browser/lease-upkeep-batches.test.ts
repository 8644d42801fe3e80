import type { IncomingMessage } from 'node:http';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataPlaneClient, ProviderError } from '../../libs/provider/index.js';
import { runLeaseUpkeep, type UpkeepLease } from '../../libs/runtime/index.js';
import {
  BrowserWorkerRegistry,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
} from '../../libs/store/index.js';
import {
  leaseForRunningRun,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
  TestClock,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession } from '../fixtures/run-store.js';

const MINUTE_MS = 60_000;
/** The run worker that executed every run here: its upkeep keeps their leases. */
const RUN_WORKER = 'rw-batches';

/**
 * The upkeep renews in batches, one `POST /v1/renewals` per browser worker per batch,
 * counted where they arrive (each worker's own HTTP server), against two real workers (Chromium,
 * Redis) on one clock the test moves.
 */
describe('lease upkeep in batches', () => {
  const prefix = uniquePrefix('upkeep-batches');
  const clock = new TestClock();
  const workers: TestBrowserWorker[] = [];
  /** `METHOD path` of every request each worker's server received, by worker id. */
  const received = new Map<string, string[]>();
  let redis: Redis;
  let runs: RunStore;
  let leases: RedisLeaseStore;
  let registry: BrowserWorkerRegistry;
  let index: LeaseUpkeepIndex;
  let sessionId: string;

  beforeAll(async () => {
    for (const workerId of ['bw-batch-a', 'bw-batch-b']) {
      const worker = await startTestBrowserWorker({ prefix, workerId, clock });
      const seen: string[] = [];
      received.set(workerId, seen);
      worker.handle.app.server.on('request', (request: IncomingMessage) => {
        seen.push(`${request.method} ${request.url}`);
      });
      workers.push(worker);
    }
    redis = new Redis(testRedisUrl());
    runs = new RunStore(redis, `${prefix}:`, clock.now);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    index = new LeaseUpkeepIndex(redis, `${prefix}:`, leases);
    sessionId = await createTestSession(runs, 't1', { instructions: 'work' });
  });

  afterAll(async () => {
    for (const worker of workers) await worker.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis?.disconnect();
  });

  let profiles = 0;
  /** A running run holding a fresh lease (15 minutes) served by `worker`. */
  async function leaseOn(worker: TestBrowserWorker): Promise<{ profileId: string; leaseId: string }> {
    profiles += 1;
    const profileId = `batch-${profiles}`;
    const client = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    const { runId, leaseId } = await leaseForRunningRun(client, runs, sessionId, profileId);
    await index.add(RUN_WORKER, runId, { profile: { tenant: 't1', id: profileId }, leaseId });
    return { profileId, leaseId };
  }

  function renewRequests(workerId: string): { batches: number; alone: number } {
    const seen = received.get(workerId) ?? [];
    return {
      batches: seen.filter((line) => line === 'POST /v1/renewals').length,
      alone: seen.filter((line) => /^POST .*\/renew$/.test(line)).length,
    };
  }

  it('sends each browser worker one request per batch of its due leases, and renews every one', async () => {
    const [a, b] = workers as [TestBrowserWorker, TestBrowserWorker];
    const [onA, onB] = await Promise.all([
      Promise.all([leaseOn(a), leaseOn(a), leaseOn(a)]),
      Promise.all([leaseOn(b), leaseOn(b)]),
    ]);
    clock.advance(11 * MINUTE_MS);
    for (const seen of received.values()) seen.length = 0;

    const pass = await runLeaseUpkeep({
      leases: index.forWorker(RUN_WORKER),
      runs,
      workers: registry,
      dataPlaneToken: TEST_TOKEN,
      clock: clock.now,
      renewalBatchSize: 2,
    });

    expect(pass.failed).toEqual([]);
    expect([...pass.renewed].sort()).toEqual([...onA, ...onB].map((held) => held.leaseId).sort());
    // Three due leases on A in batches of two: two requests; two on B: one. None renewed alone.
    expect(renewRequests('bw-batch-a')).toEqual({ batches: 2, alone: 0 });
    expect(renewRequests('bw-batch-b')).toEqual({ batches: 1, alone: 0 });
    for (const { profileId, leaseId } of [...onA, ...onB]) {
      const lease = await leases.getLease({ tenant: 't1', id: profileId }, leaseId);
      expect(lease?.expiresAtMs).toBeGreaterThan(clock.now() + 5 * MINUTE_MS);
    }
  });

  it('counts a renewal its batch refused as failed, with the error the single renew gives, and renews the rest', async () => {
    const [a] = workers as [TestBrowserWorker];
    const held = await leaseOn(a);
    clock.advance(11 * MINUTE_MS);
    const live = await index.liveLeasesOf(RUN_WORKER);
    const real = live.find((lease) => lease.id === held.leaseId);
    if (!real) throw new Error('the lease is not listed');
    // A lease listed live that is gone by the time its renewal arrives (closed in between).
    const gone: UpkeepLease = { ...real, id: 'lse_closedinbetween01' };
    const errors: Array<{ leaseId: string; error: unknown }> = [];

    const pass = await runLeaseUpkeep({
      leases: { listLiveLeases: async () => [...live, gone] },
      runs,
      workers: registry,
      dataPlaneToken: TEST_TOKEN,
      clock: clock.now,
      onError: (lease, error) => errors.push({ leaseId: lease.id, error }),
    });

    expect(pass.renewed).toContain(held.leaseId);
    expect(pass.failed).toEqual([gone.id]);
    expect(errors).toHaveLength(1);
    const thrown = await new DataPlaneClient({ baseUrl: a.url, token: TEST_TOKEN })
      .renew(gone.profile, gone.id, clock.now() + MINUTE_MS)
      .then(
        () => undefined,
        (error: unknown) => error,
      );
    expect(errors[0]?.error).toBeInstanceOf(ProviderError);
    expect(errors[0]?.error).toMatchObject({
      code: (thrown as ProviderError).code,
      operation: 'renew',
      httpStatus: 404,
      serviceCode: 'not_found',
    });
  });
});
