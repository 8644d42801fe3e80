import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { runLeaseUpkeep } from '../../libs/runtime/index.js';
import {
  BrowserWorkerRegistry,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
} from '../../libs/store/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const MINUTE_MS = 60_000;
/** The run worker that executed every run here: its upkeep keeps their leases. */
const RUN_WORKER = 'rw-upkeep';

/** ADR-0127 d5–d6: the run workers' upkeep, against a real lease service on a clock the test moves. */
describe('lease upkeep', () => {
  const prefix = uniquePrefix('upkeep');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let store: RunStore;
  let leases: RedisLeaseStore;
  let registry: BrowserWorkerRegistry;
  let index: LeaseUpkeepIndex;
  let admin: DataPlaneClient;
  let sessionId: string;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    redis = new Redis(testRedisUrl());
    store = new RunStore(redis, `${prefix}:`, worker.clock.now);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    index = new LeaseUpkeepIndex(redis, `${prefix}:`, leases);
    admin = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    sessionId = await createTestSession(store, 't1', { instructions: 'work' });
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const pass = () =>
    runLeaseUpkeep({
      leases: index.forWorker(RUN_WORKER),
      runs: store,
      workers: registry,
      dataPlaneToken: TEST_TOKEN,
      clock: worker.clock.now,
    });

  let profiles = 0;
  /** A run in `status` holding a fresh lease on a profile of its own. */
  async function runWithLease(
    status: 'running' | 'parked' | 'queued' | 'succeeded' | 'waiting_child',
    timeoutMs = 3 * 60 * MINUTE_MS,
  ): Promise<{ run: RunView; profileId: string; leaseId: string }> {
    profiles += 1;
    const profileId = `upkeep-${profiles}`;
    await admin.createProfile({
      id: profileId,
      tenant: 't1',
      principal: 'alice',
      allowed_origins: ['http://127.0.0.1:1'],
    });
    const submitted = await store.submitRun({
      tenant: 't1',
      principal: 'alice',
      sessionId,
      input: 'x',
      limits: TEST_RUN_LIMITS,
      timeoutMs,
    });
    const run = submitted.run;
    ran(await store.claimRun(run.id, 1, 'owner'));
    if (status === 'parked')
      await store.requestApproval(run.id, 'owner', {
        invocationId: `${run.id}-i`,
        tool: 'browser.act',
        arguments: {},
      });
    if (status === 'queued') {
      ran(await store.parkRun(run.id, 'owner'));
      ran(await store.requeueRun(run.id));
    }
    if (status === 'succeeded')
      ran(await store.finishRun(run.id, 'owner', { status: 'succeeded', result: 'ok' }));
    if (status === 'waiting_child') ran(await store.waitRun(run.id, 'owner', 'waiting_child'));
    expect((await store.getRun(run.id))?.status).toBe(status);
    const { lease } = await admin.acquire(
      { tenant: 't1', id: profileId },
      {
        tenant: 't1',
        principal: 'alice',
        run_id: run.id,
        attempt: 1,
        requested_expires_at_ms: run.deadline_at_ms,
      },
      idemKey(),
    );
    // As the run worker's acquisition notes it: in its upkeep index.
    await index.add(RUN_WORKER, run.id, {
      profile: { tenant: 't1', id: profileId },
      leaseId: lease.lease_id,
    });
    return { run, profileId, leaseId: lease.lease_id };
  }

  it('keeps the page of a run parked on its approval for 50 minutes, renewing only when due', async () => {
    const { profileId, leaseId } = await runWithLease('parked');
    const acquired = await leases.getLease({ tenant: 't1', id: profileId }, leaseId);
    const renewals: number[] = [];
    for (let minute = 1; minute <= 50; minute += 1) {
      worker.clock.advance(MINUTE_MS);
      const done = await pass();
      if (done.renewed.includes(leaseId)) renewals.push(minute);
      expect(done.failed).toEqual([]);
    }
    const lease = await leases.getLease({ tenant: 't1', id: profileId }, leaseId);
    expect(lease?.state).toBe('live');
    expect(lease?.expiresAtMs).toBeGreaterThan(worker.clock.now());
    // Due within five minutes of expiry, once each time: 15 minutes granted, then 10 minutes a step.
    expect(renewals).toEqual([10, 20, 30, 40, 50]);
    expect(lease?.expiresAtMs).toBeLessThanOrEqual((acquired?.acquiredAtMs ?? 0) + 60 * MINUTE_MS);
  });

  it('never renews past the lease lifetime or the run deadline', async () => {
    const capped = await runWithLease('running', 22 * MINUTE_MS);
    worker.clock.advance(11 * MINUTE_MS);
    expect((await pass()).renewed).toContain(capped.leaseId);
    const lease = await leases.getLease({ tenant: 't1', id: capped.profileId }, capped.leaseId);
    expect(lease?.expiresAtMs).toBe(capped.run.deadline_at_ms);
    worker.clock.advance(10 * MINUTE_MS);
    const done = await pass();
    expect(done.renewed).not.toContain(capped.leaseId);
    expect(done.failed).toEqual([]);
  });

  it('renews the lease of a run queued to resume', async () => {
    const { leaseId } = await runWithLease('queued');
    worker.clock.advance(11 * MINUTE_MS);
    expect((await pass()).renewed).toContain(leaseId);
  });

  it('seals and closes the leases of runs done with the page, due or not', async () => {
    const ended = await runWithLease('succeeded');
    const waiting = await runWithLease('waiting_child');
    const done = await pass();
    expect(done.closed).toEqual(expect.arrayContaining([ended.leaseId, waiting.leaseId]));
    for (const { profileId, leaseId } of [ended, waiting]) {
      expect(await leases.getLease({ tenant: 't1', id: profileId }, leaseId)).toMatchObject({
        state: 'closed',
        sealed: true,
      });
      expect((await leases.getProfile({ tenant: 't1', id: profileId }))?.sealedAtMs).toBeDefined();
    }
  });
});
