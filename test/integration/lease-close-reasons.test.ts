import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateProfile, ProfileRef } from '../../libs/contracts/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const NOW_MS = 1_800_000_000_000;
const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };

/** A lease's close reason says why it closed, however many closers race (ADR-0127, DESIGN §5). */
describe('a lease closed by two closers at once', () => {
  const prefix = uniquePrefix('close-reasons');
  let redis: Redis;
  let leases: RedisLeaseStore;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-close-reasons');
    leases = new RedisLeaseStore(redis, `${prefix}:`);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  async function liveLease(id: string): Promise<ProfileRef> {
    const profile: CreateProfile = {
      tenant: 'acme',
      id,
      principal: 'alice',
      allowed_origins: ['https://shop.test'],
      frame_origins: [],
      subresources: 'any',
      protected: false,
    };
    await leases.createProfile(profile, NOW_MS);
    const ref = { tenant: 'acme', id };
    const acquired = await leases.acquire({
      profile: ref,
      newLeaseId: `lse_${id}`,
      scope: { tenant: 'acme', principal: 'alice', run_id: 'run_a', attempt: 1 },
      providerRef: 'bw-a',
      requestedExpiresAtMs: NOW_MS + 60_000,
      nowMs: NOW_MS,
      caps: CAPS,
    });
    expect(acquired.status).toBe('created');
    return ref;
  }

  it('stays revoked when a restarted worker and the old process both revoke it', async () => {
    // CI, stop 23: the restarted worker's revokeOrphans began the close; the old process's expiry
    // sweep, finding its lease no longer live, revoked it too, and the record said `expired`.
    const ref = await liveLease('twice-revoked');
    expect(await leases.beginClose(ref, 'lse_twice-revoked', NOW_MS + 1_000, 'revoked')).toMatchObject({
      status: 'closing',
    });
    expect(await leases.beginClose(ref, 'lse_twice-revoked', NOW_MS + 1_100, 'revoked')).toMatchObject({
      status: 'closing',
      sealAllowed: false,
    });
    await leases.finishClose(ref, 'lse_twice-revoked', NOW_MS + 1_200, undefined);
    expect(await leases.getLease(ref, 'lse_twice-revoked')).toMatchObject({
      state: 'closed',
      closeReason: 'revoked',
      sealed: false,
    });
  });

  it('is revoked, unsealed, when a restart revokes a seal its crashed process had begun', async () => {
    const ref = await liveLease('cut-seal');
    expect((await leases.beginClose(ref, 'lse_cut-seal', NOW_MS + 1_000, 'closed')).status).toBe('closing');
    expect(await leases.beginClose(ref, 'lse_cut-seal', NOW_MS + 2_000, 'revoked')).toMatchObject({
      status: 'closing',
      sealAllowed: false,
    });
    await leases.finishClose(ref, 'lse_cut-seal', NOW_MS + 2_100, undefined);
    expect(await leases.getLease(ref, 'lse_cut-seal')).toMatchObject({
      closeReason: 'revoked',
      sealed: false,
    });
  });

  it('stays expired when an expired lease that began closing is closed again', async () => {
    const ref = await liveLease('expired-twice');
    const later = NOW_MS + 120_000;
    expect((await leases.beginClose(ref, 'lse_expired-twice', later, 'expired')).status).toBe('closing');
    expect((await leases.beginClose(ref, 'lse_expired-twice', later + 100, 'revoked')).status).toBe(
      'closing',
    );
    await leases.finishClose(ref, 'lse_expired-twice', later + 200, undefined);
    expect(await leases.getLease(ref, 'lse_expired-twice')).toMatchObject({
      closeReason: 'expired',
      sealed: false,
    });
  });
});
