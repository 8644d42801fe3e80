import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateProfile, RunView } from '../../libs/contracts/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { ProfileTurns, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

const NOW_MS = 1_800_000_000_000;
const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };

/**
 * What the hundred-run fleet test (test/chaos/hundred-runs-processes.test.ts) found, each reduced
 * to the store calls that show it on a real Redis.
 */
describe('the hundred-run fleet’s findings, reduced', () => {
  const prefix = uniquePrefix('scale-findings');
  let redis: Redis;
  let store: RunStore;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-scale-findings');
    store = new RunStore(redis, `${prefix}:`);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  it('never lets two runs of one profile hold its turn when the later-submitted one is claimed first', async () => {
    // In the fleet: r0p3 and r1p3, submitted 188 ms apart, claimed 44 ms apart by two run workers;
    // neither waited, r1p3 took the lease and r0p3 failed profile_unavailable.
    const turns = new ProfileTurns(redis, `${prefix}:`);
    const lifecycle = new RunLifecycle({ store, turns, enqueue: async () => {} });
    const sessionId = await createTestSession(store, 'acme', { instructions: 'x', browserProfileId: 'race' });
    const earlier = await submitStoreRun(store, sessionId);
    const later = await submitStoreRun(store, sessionId);
    const claim = async (run: RunView) => ran(await store.claimRun(run.id, run.execution, `owner-${run.id}`));
    const laterGoes = await lifecycle.takeTurn(await claim(later), `owner-${later.id}`);
    const earlierGoes = await lifecycle.takeTurn(await claim(earlier), `owner-${earlier.id}`);
    expect([laterGoes, earlierGoes].filter((verdict) => verdict === 'go')).toHaveLength(1);
  });

  it('lets a lease whose close was cut by a crash be closed once it has expired', async () => {
    // In the fleet: r1p4's run worker asked bw-a to close (seal) its lease; bw-a was SIGKILLed
    // mid-close. The lease stayed `closing` (close_reason `closed`), its restart's revokeOrphans
    // left it so (beginClose answered in_progress), and every later run of shop-4 failed
    // provider_unavailable ("close answered 409 idempotency_in_progress").
    const leases = new RedisLeaseStore(redis, `${prefix}:`);
    const profile: CreateProfile = {
      tenant: 'acme',
      id: 'cut-close',
      principal: 'alice',
      allowed_origins: ['https://shop.test'],
      frame_origins: [],
      subresources: 'any',
      protected: false,
    };
    await leases.createProfile(profile, NOW_MS);
    const ref = { tenant: 'acme', id: 'cut-close' };
    const scope = { tenant: 'acme', principal: 'alice', run_id: 'run_a', attempt: 1 };
    const acquired = await leases.acquire({
      profile: ref,
      newLeaseId: 'lse_cut',
      scope,
      providerRef: 'bw-a',
      requestedExpiresAtMs: NOW_MS + 60_000,
      nowMs: NOW_MS,
      caps: CAPS,
    });
    expect(acquired.status).toBe('created');
    // The close begins, then its process dies before finishClose.
    expect((await leases.beginClose(ref, 'lse_cut', NOW_MS + 1_000, 'closed')).status).toBe('closing');

    // Past its expiry another run asks for the profile: the store says the old lease is expired, and
    // closing it unsealed (ADR-0127 d8: whoever asks, however late) must be allowed to finish it.
    const later = NOW_MS + 120_000;
    const next = await leases.acquire({
      profile: ref,
      newLeaseId: 'lse_next',
      scope: { ...scope, run_id: 'run_b' },
      providerRef: 'bw-a',
      requestedExpiresAtMs: later + 60_000,
      nowMs: later,
      caps: CAPS,
    });
    expect(next).toEqual({ status: 'expired', leaseId: 'lse_cut' });
    expect((await leases.beginClose(ref, 'lse_cut', later, 'expired')).status).toBe('closing');
  });
});
