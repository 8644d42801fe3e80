import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LocalArtifactStore } from '../../libs/artifacts/index.js';
import { RunKeys, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { ArtifactSweep } from '../../libs/sweeper/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

const TENANT = 'acme';
/** A few seconds: long enough to read every TTL before it passes, short enough to wait out. */
const RETENTION_MS = 2_000;
const JPEG = new Uint8Array([0xff, 0xd8, 0xff, 0xd9]);

/**
 * Retention: a run's record, steps, events and artifacts expire a retention after it
 * ends (real Redis expiry, no fake timers); a run that has not ended keeps everything, and a
 * retried run keeps its keys again.
 */
describe('a run expires a retention after its end, and only then', () => {
  const base = uniquePrefix('run-retention');
  const keys = new RunKeys(`${base}:`);
  let redis: Redis;
  let store: RunStore;
  let transcripts: RunTranscripts;
  let artifactsDir: string;
  let artifacts: LocalArtifactStore;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-retention');
    store = new RunStore(redis, `${base}:`, Date.now, { retentionMs: RETENTION_MS });
    transcripts = new RunTranscripts(redis, `${base}:`);
    artifactsDir = await mkdtemp(join(tmpdir(), 'lh-retention-'));
    artifacts = await new LocalArtifactStore(artifactsDir).open();
    sessionId = await createTestSession(store, TENANT, { instructions: 'act' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, base);
    await closeRedis(redis);
    await rm(artifactsDir, { recursive: true, force: true });
  });

  /** A running run by `owner` that wrote a little of everything a run owns, a screenshot too. */
  async function busyRun(owner: string): Promise<string> {
    const run = await submitStoreRun(store, sessionId);
    ran(await store.claimRun(run.id, 1, owner));
    await store.addUsage(run.id, owner, { steps: 1 });
    await store.saveLoopState(run.id, owner, { calls: [] });
    await transcripts.append(run.id, owner, { kind: 'model', text: 'hi' });
    await store.recordInvocation(run.id, owner, { step: 0, index: 0, tool: 'browser.act', state: 'started' });
    // The step records as the loop keeps them (a hash of steps and their order).
    await redis
      .multi()
      .hset(keys.steps(run.id), 'stp_1', JSON.stringify({ id: 'stp_1', seq: 1 }))
      .rpush(keys.stepOrder(run.id), 'stp_1')
      .exec();
    await artifacts.put({ tenant: TENANT, runId: run.id, name: 'step-1.jpg' }, JPEG, 'image/jpeg');
    return run.id;
  }

  /** PTTL of every key the run owns that exists (-2 absent keys are left out). */
  async function ttls(runId: string): Promise<number[]> {
    const attempts = Number(await redis.hget(keys.run(runId), 'attempt')) || 2;
    const pipeline = redis.pipeline();
    for (const key of keys.runOwned(runId, attempts)) pipeline.pttl(key);
    const replies = (await pipeline.exec()) ?? [];
    return replies.map(([, value]) => Number(value)).filter((ttl) => ttl !== -2);
  }

  async function ownedKeysLeft(runId: string): Promise<number> {
    return redis.exists(...keys.runOwned(runId, 2));
  }

  async function screenshot(runId: string): Promise<boolean> {
    return (await artifacts.get({ tenant: TENANT, runId, name: 'step-1.jpg' })) !== undefined;
  }

  it('expires an ended run, its steps, events and artifacts, and leaves running, parked and retried runs whole', async () => {
    const succeeded = await busyRun('w1');
    ran(await store.finishRun(succeeded, 'w1', { status: 'succeeded', result: 'done' }));
    const cancelled = await submitStoreRun(store, sessionId);
    ran(await store.cancelRun(TENANT, cancelled.id));
    const swept = await busyRun('w2');
    ran(await store.failRun(swept, 'deadline_exceeded'));

    const running = await busyRun('w3');
    const parked = await busyRun('w4');
    const { approvalId, transition } = await store.requestApproval(parked, 'w4', {
      invocationId: `${parked}-a1-s0-i0`,
      tool: 'browser.act',
      arguments: {},
    });
    ran(transition);
    const retried = await busyRun('w5');
    ran(await store.finishRun(retried, 'w5', { status: 'failed', code: 'model_error', message: 'down' }));
    ran(await store.retryRun(TENANT, retried));

    // Every key an ended run owns is counting down; nothing of a live run is.
    for (const ended of [succeeded, cancelled.id, swept]) {
      const left = await ttls(ended);
      expect(left.length).toBeGreaterThan(1);
      for (const ttl of left) expect(ttl).toBeGreaterThan(0);
    }
    for (const live of [running, parked, retried]) expect(new Set(await ttls(live))).toEqual(new Set([-1]));
    // The retried run's keys include the failed attempt's transcript, kept under its number.
    expect(await redis.exists(keys.attemptTranscript(retried, 1))).toBe(1);
    // The approval's pointer sits outside the run's slot: it ends a deadline and a retention later.
    expect(await redis.pttl(keys.approvalRun(approvalId))).toBeGreaterThan(3_600_000);

    const ended = [succeeded, cancelled.id, swept];
    const left = await eventually(
      async () => (await Promise.all(ended.map(ownedKeysLeft))).reduce((a, b) => a + b, 0),
      (count) => count === 0,
      RETENTION_MS + 8_000,
      200,
    );
    expect(left).toBe(0);
    expect(await store.getRun(succeeded)).toBeUndefined();
    expect(await store.readEvents(succeeded)).toEqual([]);

    // Past the retention, the live runs are untouched and still without an expiry.
    for (const live of [running, parked, retried]) {
      expect(await redis.exists(keys.run(live), keys.events(live), keys.steps(live))).toBe(3);
      expect(new Set(await ttls(live))).toEqual(new Set([-1]));
    }
    expect((await store.getRun(parked))?.status).toBe('parked');
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('pending');

    // One sweep deletes the screenshots of the runs whose records are gone, and only those.
    const sweep = new ArtifactSweep({ artifacts, store });
    expect(new Set(await sweep.sweepIfDue())).toEqual(new Set([succeeded, swept]));
    expect(await screenshot(succeeded)).toBe(false);
    expect(await screenshot(swept)).toBe(false);
    for (const live of [running, parked, retried]) expect(await screenshot(live)).toBe(true);
    // Not every pass: the next walk waits its interval.
    expect(await sweep.sweepIfDue()).toEqual([]);
  });

  it('expires the keys of a retried run again when its new attempt ends', async () => {
    const runId = await busyRun('w6');
    ran(await store.finishRun(runId, 'w6', { status: 'failed', code: 'model_error', message: 'down' }));
    ran(await store.retryRun(TENANT, runId));
    ran(await store.claimRun(runId, 2, 'w7'));
    ran(await store.finishRun(runId, 'w7', { status: 'succeeded', result: 'done' }));

    const counting = await ttls(runId);
    expect(counting.length).toBeGreaterThan(1);
    for (const ttl of counting) expect(ttl).toBeGreaterThan(0);
    expect(await redis.pttl(keys.attemptTranscript(runId, 1))).toBeGreaterThan(0);
    const left = await eventually(
      () => ownedKeysLeft(runId),
      (count) => count === 0,
      RETENTION_MS + 8_000,
      200,
    );
    expect(left).toBe(0);
  });

  it("drops a run that expired from its session's index, and keeps one still being submitted", async () => {
    const run = await submitStoreRun(store, sessionId);
    ran(await store.cancelRun(TENANT, run.id));
    // An entry whose run is not written yet: the index is written before the run's own script.
    await redis.zadd(keys.sessionRuns(sessionId), Date.now() + 120_000, 'run_inflight');
    await eventually(
      () => redis.exists(keys.run(run.id)),
      (count) => count === 0,
      RETENTION_MS + 8_000,
      200,
    );
    expect(await redis.zscore(keys.sessionRuns(sessionId), run.id)).not.toBeNull();
    // Read two minutes on: the expired run's entry is older than any submission still in flight.
    const later = new RunStore(redis, `${base}:`, () => Date.now() + 120_000, { retentionMs: RETENTION_MS });
    expect((await later.listRuns(TENANT, sessionId)).map((listed) => listed.id)).not.toContain(run.id);
    expect(await redis.zscore(keys.sessionRuns(sessionId), run.id)).toBeNull();
    expect(await redis.zscore(keys.sessionRuns(sessionId), 'run_inflight')).not.toBeNull();
  });

  it("gives the tenant's and the session's runs indexes an end: the longest run and the retention, renewed by a retry", async () => {
    const lifetimeMs = 24 * 3_600_000 + RETENTION_MS;
    const run = await submitStoreRun(store, sessionId);
    for (const key of [keys.tenantRuns(TENANT), keys.sessionRuns(sessionId)]) {
      const ttl = await redis.pttl(key);
      expect(ttl).toBeGreaterThan(lifetimeMs - 60_000);
      expect(ttl).toBeLessThanOrEqual(lifetimeMs);
    }
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.finishRun(run.id, 'w', { status: 'failed', code: 'model_error', message: 'down' }));
    await redis.pexpire(keys.tenantRuns(TENANT), 10_000);
    ran(await store.retryRun(TENANT, run.id));
    expect(await redis.pttl(keys.tenantRuns(TENANT))).toBeGreaterThan(lifetimeMs - 60_000);
  });

  it('prunes the pending index of approvals whose pointer expired', async () => {
    const short = new RunStore(redis, `${base}:`, Date.now, { retentionMs: 1 });
    const run = await submitStoreRun(short, sessionId);
    ran(await short.claimRun(run.id, 1, 'w8'));
    // A run past its deadline (the sweeper's end): its pointer lives a retention past it.
    await redis.hset(keys.run(run.id), 'deadline_at', Date.now() - 1);
    const { approvalId } = await short.requestApproval(run.id, 'w8', {
      invocationId: `${run.id}-a1-s0-i0`,
      tool: 'browser.act',
      arguments: {},
    });
    ran(await short.failRun(run.id, 'deadline_exceeded'));
    const pointers = await eventually(
      () => redis.exists(keys.approvalRun(approvalId)),
      (count) => count === 0,
      5_000,
    );
    expect(pointers).toBe(0);
    expect(await redis.zscore(keys.tenantApprovals(TENANT), approvalId)).not.toBeNull();
    expect(await short.listPendingApprovals(TENANT)).toEqual(
      expect.not.arrayContaining([expect.objectContaining({ id: approvalId })]),
    );
    expect(await redis.zscore(keys.tenantApprovals(TENANT), approvalId)).toBeNull();
  });
});
