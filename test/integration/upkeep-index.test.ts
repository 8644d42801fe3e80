import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { LeaseUpkeepIndex, RedisLeaseStore, RunStore, RunWorkerRoster } from '../../libs/store/index.js';
import { handOverOrphanedLeases } from '../../libs/sweeper/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { createStoreProfile } from '../fixtures/lease-store.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, submitStoreRun } from '../fixtures/run-store.js';

const NOW_MS = 1_800_000_000_000;
const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };
const TENANT = 'acme';
/** Long enough that no heartbeat here lapses while a test runs: a worker is gone when it leaves. */
const BEAT_TTL_MS = 600_000;

describe('each run worker keeps up the leases of its own runs (ADR-0127 d6)', () => {
  const prefix = `${uniquePrefix('upkeep-index')}:`;
  let redis: Redis;
  let leases: RedisLeaseStore;
  let runs: RunStore;
  let index: LeaseUpkeepIndex;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-upkeep-index');
    leases = new RedisLeaseStore(redis, prefix);
    runs = new RunStore(redis, prefix, () => NOW_MS);
    index = new LeaseUpkeepIndex(redis, prefix, leases);
    sessionId = await createTestSession(runs, TENANT, { instructions: 'hold the page' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  /** A running run claimed by `workerId`, holding a live lease on a profile of its own, as that worker notes it. */
  async function runWithLease(workerId: string, name: string): Promise<{ run: RunView; leaseId: string }> {
    const run = await submitStoreRun(runs, sessionId, { tenant: TENANT });
    const claim = await runs.claimRun(run.id, run.execution, `job-${name}:tok`, { workerId });
    expect(claim.ok).toBe(true);
    const profile = { tenant: TENANT, id: `prf-${name}` };
    await createStoreProfile(leases, profile, NOW_MS);
    const acquired = await leases.acquire({
      profile,
      newLeaseId: `lse_${name}`,
      scope: { tenant: TENANT, principal: 'alice', run_id: run.id, attempt: run.attempt },
      providerRef: 'bw-a',
      requestedExpiresAtMs: NOW_MS + 15 * 60_000,
      nowMs: NOW_MS,
      caps: CAPS,
    });
    expect(acquired.status).toBe('created');
    await index.add(workerId, run.id, { profile, leaseId: `lse_${name}` });
    return { run, leaseId: `lse_${name}` };
  }

  it("lists a worker's own leases and no other worker's", async () => {
    const mine = await runWithLease('rw-own-a', 'own-a');
    const theirs = await runWithLease('rw-own-b', 'own-b');
    expect((await index.liveLeasesOf('rw-own-a')).map((lease) => lease.id)).toEqual([mine.leaseId]);
    expect((await index.liveLeasesOf('rw-own-b')).map((lease) => lease.id)).toEqual([theirs.leaseId]);
    expect(await index.liveLeasesOf('rw-own-none')).toEqual([]);
  });

  it('prunes a closed lease from its worker index when the upkeep next reads it', async () => {
    const { leaseId } = await runWithLease('rw-prune', 'prune');
    const profile = { tenant: TENANT, id: 'prf-prune' };
    expect((await leases.beginClose(profile, leaseId, NOW_MS + 1_000, 'closed')).status).toBe('closing');
    await leases.finishClose(profile, leaseId, NOW_MS + 1_100, undefined);

    expect(await index.liveLeasesOf('rw-prune')).toEqual([]);
    expect(await index.entries('rw-prune')).toEqual([]);
  });

  it("moves a run's lease into the index of the worker that claims the run", async () => {
    const { run, leaseId } = await runWithLease('rw-claim-a', 'claim');
    // Its job stalled on worker A; BullMQ hands it to worker B, which takes the run over.
    const takeover = await runs.claimRun(run.id, run.execution, 'job-claim:tok-b', {
      takeOver: true,
      workerId: 'rw-claim-b',
    });
    expect(takeover.ok && takeover.detail).toBe('taken_over');

    expect(await index.entries('rw-claim-a')).toEqual([]);
    expect((await index.liveLeasesOf('rw-claim-b')).map((lease) => lease.id)).toEqual([leaseId]);
    expect(await redis.hget(`${prefix}{run:${run.id}}:run`, 'upkeep_by')).toBe('rw-claim-b');
  });

  it("hands a gone worker's leases to a live worker once, and leaves them when none is alive", async () => {
    // Its own roster: the workers of the tests above are not part of this one.
    const own = new RunWorkerRoster(redis, `${prefix}handover:`);
    const ownIndex = new LeaseUpkeepIndex(redis, `${prefix}handover:`, leases);
    const orphan = await runWithLease('rw-dead', 'orphan');
    // The index lives under the handover prefix; the lease record under the test's.
    await ownIndex.add('rw-dead', orphan.run.id, {
      profile: { tenant: TENANT, id: 'prf-orphan' },
      leaseId: orphan.leaseId,
    });
    await own.heartbeat('rw-dead', NOW_MS, BEAT_TTL_MS);
    await own.leave('rw-dead');

    // No run worker alive: nothing moves, the sweeper renews nothing, the lease will expire.
    expect(await handOverOrphanedLeases({ roster: own, index: ownIndex })).toEqual({
      moved: [],
      stranded: ['rw-dead'],
    });
    expect((await ownIndex.entries('rw-dead')).map((entry) => entry.leaseId)).toEqual([orphan.leaseId]);

    await own.heartbeat('rw-live', NOW_MS, BEAT_TTL_MS);
    expect(await handOverOrphanedLeases({ roster: own, index: ownIndex })).toEqual({
      moved: [{ from: 'rw-dead', to: 'rw-live', leases: 1 }],
      stranded: [],
    });
    expect((await ownIndex.liveLeasesOf('rw-live')).map((lease) => lease.id)).toEqual([orphan.leaseId]);
    expect(await ownIndex.entries('rw-dead')).toEqual([]);
    // The next pass finds nothing left to hand on: the gone worker is forgotten.
    expect(await handOverOrphanedLeases({ roster: own, index: ownIndex })).toEqual({
      moved: [],
      stranded: [],
    });
    expect(await own.members()).toEqual({ live: ['rw-live'], gone: [] });
  });
});
