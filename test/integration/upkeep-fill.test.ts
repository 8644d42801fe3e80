import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { LeaseUpkeepIndex, RedisLeaseStore, RunStore, RunWorkerRoster } from '../../libs/store/index.js';
import { adoptUnindexedLeases } from '../../libs/sweeper/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { createStoreProfile } from '../fixtures/lease-store.js';
import { capturingLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, submitStoreRun } from '../fixtures/run-store.js';
import { startTestSweeper } from '../fixtures/sweeper.js';

const NOW_MS = 1_800_000_000_000;
const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };
const TENANT = 'acme';
/** Long enough that no heartbeat here lapses while a test runs. */
const BEAT_TTL_MS = 600_000;

/**
 * A fleet upgraded while leases were live: the leases acquired before the per-worker index have no
 * entry in any worker's, so no run worker would renew them. The sweeper fills the index once.
 */
describe('the sweeper adopts the live leases no run worker keeps up, once per fleet (ADR-0127 d6)', () => {
  const base = uniquePrefix('upkeep-fill');
  /** Each test's fleet prefix, without its colon (a queue prefix takes none). */
  const fleets: string[] = [];
  let redis: Redis;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-upkeep-fill');
  });
  afterAll(async () => {
    for (const name of fleets) await deletePrefixedKeys(redis, name);
    await closeRedis(redis);
  });

  /** A fleet's stores under a prefix of its own, so each test's fill reads only its own leases. */
  async function fleet(label: string) {
    const root = `${base}-${label}`;
    fleets.push(root);
    const prefix = `${root}:`;
    const leases = new RedisLeaseStore(redis, prefix);
    const runs = new RunStore(redis, prefix, () => NOW_MS);
    const index = new LeaseUpkeepIndex(redis, prefix, leases);
    const roster = new RunWorkerRoster(redis, prefix);
    const sessionId = await createTestSession(runs, TENANT, { instructions: 'hold the page' });

    /** A live lease on a profile of its own, held for `runId`. */
    async function liveLease(name: string, runId: string, attempt: number) {
      const profile = { tenant: TENANT, id: `prf-${name}` };
      await createStoreProfile(leases, profile, NOW_MS);
      const leaseId = `lse_${name}`;
      const acquired = await leases.acquire({
        profile,
        newLeaseId: leaseId,
        scope: { tenant: TENANT, principal: 'alice', run_id: runId, attempt },
        providerRef: 'bw-a',
        requestedExpiresAtMs: NOW_MS + 15 * 60_000,
        nowMs: NOW_MS,
        caps: CAPS,
      });
      expect(acquired.status).toBe('created');
      return { profile, leaseId };
    }

    /** A running run holding a live lease; `keptBy` notes it as a run worker of this version does. */
    async function runWithLease(name: string, keptBy?: string): Promise<{ run: RunView; leaseId: string }> {
      const run = await submitStoreRun(runs, sessionId, { tenant: TENANT });
      // Claimed as a worker of the version before the index did: no worker id.
      expect((await runs.claimRun(run.id, run.execution, `job-${name}:tok`)).ok).toBe(true);
      const { profile, leaseId } = await liveLease(name, run.id, run.attempt);
      if (keptBy) await index.add(keptBy, run.id, { profile, leaseId });
      return { run, leaseId };
    }

    /** The workers whose index holds `leaseId`. */
    async function keepers(leaseId: string, workers: readonly string[]): Promise<string[]> {
      const held = await Promise.all(
        workers.map(async (worker) =>
          (await index.entries(worker)).some((entry) => entry.leaseId === leaseId),
        ),
      );
      return workers.filter((_, at) => held[at]);
    }

    const marker = () => redis.exists(`${prefix}upkeep-index:filled`);
    const deps = { roster, index, leases };
    return { root, prefix, index, roster, deps, liveLease, runWithLease, keepers, marker };
  }

  it("adopts each unindexed live lease into a live worker's index, in turn, and leaves indexed ones where they are", async () => {
    const f = await fleet('spread');
    const workers = ['rw-a', 'rw-b', 'rw-gone'];
    for (const worker of workers) await f.roster.heartbeat(worker, NOW_MS, BEAT_TTL_MS);
    await f.roster.leave('rw-gone');
    const kept = await f.runWithLease('kept', 'rw-b');
    const orphans = [
      await f.runWithLease('old-1'),
      await f.runWithLease('old-2'),
      await f.runWithLease('old-3'),
    ];

    const fill = await adoptUnindexedLeases(f.deps);

    expect(fill.status).toBe('filled');
    const adopted = fill.status === 'filled' ? fill.adopted : [];
    expect(adopted.map((lease) => lease.leaseId).sort()).toEqual(
      orphans.map((orphan) => orphan.leaseId).sort(),
    );
    // Spread over the live workers in turn; none goes to the gone one.
    expect(adopted.map((lease) => lease.to)).toEqual(['rw-a', 'rw-b', 'rw-a']);
    for (const { leaseId, to, runId } of adopted) {
      expect(await f.keepers(leaseId, workers)).toEqual([to]);
      // The run's record names the lease and its worker, so the run's next claim moves it.
      expect(await redis.hmget(`${f.prefix}{run:${runId}}:run`, 'upkeep_by', 'lease_id')).toEqual([
        to,
        leaseId,
      ]);
    }
    for (const orphan of orphans)
      expect(adopted.find((lease) => lease.leaseId === orphan.leaseId)?.runId).toBe(orphan.run.id);
    // Already in a worker's index: left there, and in no other.
    expect(await f.keepers(kept.leaseId, workers)).toEqual(['rw-b']);
    expect((await f.index.liveLeasesOf('rw-a')).map((lease) => lease.id).sort()).toEqual(
      adopted
        .filter((lease) => lease.to === 'rw-a')
        .map((lease) => lease.leaseId)
        .sort(),
    );
    expect(await f.marker()).toBe(1);
  });

  it('reads the fleet once: after the marker a later pass adopts nothing', async () => {
    const f = await fleet('once');
    await f.roster.heartbeat('rw-a', NOW_MS, BEAT_TTL_MS);
    const first = await f.runWithLease('first');
    expect(await adoptUnindexedLeases(f.deps)).toEqual({
      status: 'filled',
      adopted: [{ leaseId: first.leaseId, runId: first.run.id, to: 'rw-a' }],
    });
    expect(await f.marker()).toBe(1);

    // Unindexed again, as no lease of this version ever is: the fleet-wide read is not repeated.
    const later = await f.runWithLease('later');
    expect(await adoptUnindexedLeases(f.deps)).toEqual({ status: 'already_filled' });
    expect(await f.keepers(later.leaseId, ['rw-a'])).toEqual([]);
    expect(await redis.hget(`${f.prefix}{run:${later.run.id}}:run`, 'upkeep_by')).toBeNull();
  });

  it('adopts nothing and sets no marker while no run worker is alive, and adopts once one is', async () => {
    const f = await fleet('no-worker');
    await f.roster.heartbeat('rw-gone', NOW_MS, BEAT_TTL_MS);
    await f.roster.leave('rw-gone');
    const orphan = await f.runWithLease('waiting');

    expect(await adoptUnindexedLeases(f.deps)).toEqual({ status: 'no_worker' });
    expect(await f.keepers(orphan.leaseId, ['rw-gone', 'rw-late'])).toEqual([]);
    expect(await f.marker()).toBe(0);

    await f.roster.heartbeat('rw-late', NOW_MS, BEAT_TTL_MS);
    expect(await adoptUnindexedLeases(f.deps)).toEqual({
      status: 'filled',
      adopted: [{ leaseId: orphan.leaseId, runId: orphan.run.id, to: 'rw-late' }],
    });
    expect(await f.keepers(orphan.leaseId, ['rw-gone', 'rw-late'])).toEqual(['rw-late']);
    expect(await f.marker()).toBe(1);
  });

  it('sets the marker when no live lease needs adopting: all indexed, or their runs gone', async () => {
    const f = await fleet('none');
    await f.roster.heartbeat('rw-a', NOW_MS, BEAT_TTL_MS);
    const kept = await f.runWithLease('kept-only', 'rw-a');
    // Its run's record expired: nobody needs the page, and adopting it would write a record anew.
    const runless = await f.liveLease('runless', 'run-expired', 1);
    expect(await adoptUnindexedLeases(f.deps)).toEqual({ status: 'filled', adopted: [] });
    expect(await f.keepers(kept.leaseId, ['rw-a'])).toEqual(['rw-a']);
    expect(await f.keepers(runless.leaseId, ['rw-a'])).toEqual([]);
    expect(await redis.exists(`${f.prefix}{run:run-expired}:run`)).toBe(0);
    expect(await f.marker()).toBe(1);
  });

  it("fills the index on the sweeper's own pass and says how many it adopted", async () => {
    const f = await fleet('sweeper');
    await f.roster.heartbeat('rw-a', NOW_MS, BEAT_TTL_MS);
    const orphan = await f.runWithLease('swept');
    const captured = capturingLogger('info');
    const sweeper = await startTestSweeper(f.root, { logger: captured.logger });
    try {
      const keepers = await eventually(
        () => f.keepers(orphan.leaseId, ['rw-a']),
        (found) => found.length > 0,
        10_000,
      );
      expect(keepers).toEqual(['rw-a']);
      expect(await eventually(f.marker, (set) => set === 1, 10_000)).toBe(1);
    } finally {
      await sweeper.close();
    }
    const lines = captured.lines.filter((line) => line.leases !== undefined && /adopted/.test(line.msg));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ leases: 1, level: 30 });
  });
});
