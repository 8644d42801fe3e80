import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CreateProfile } from '../../libs/contracts/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const NOW_MS = 1_800_000_000_000;

function profileOf(tenant: string, id: string): CreateProfile {
  return {
    tenant,
    id,
    principal: 'alice',
    allowed_origins: ['https://shop.test'],
    frame_origins: [],
    subresources: 'any',
    protected: false,
  };
}

describe("a profile's indexes are written before its record (one slot per script)", () => {
  const prefix = `${uniquePrefix('profile-indexes')}:`;
  let redis: Redis;
  let leases: RedisLeaseStore;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-profile-indexes');
    leases = new RedisLeaseStore(redis, prefix);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  it('lists a created profile in its tenant and among every profile', async () => {
    expect(await leases.createProfile(profileOf('t-list', 'shop'), NOW_MS)).toBe(true);
    expect((await leases.listProfiles('t-list')).map((profile) => profile.id)).toEqual(['shop']);
    expect(await leases.listAllProfileRefs()).toContainEqual({ tenant: 't-list', id: 'shop' });
  });

  it('creates a profile once; a second create leaves one record and one index entry each', async () => {
    expect(await leases.createProfile(profileOf('t-twice', 'shop'), NOW_MS)).toBe(true);
    expect(await leases.createProfile(profileOf('t-twice', 'shop'), NOW_MS + 1)).toBe(false);
    expect(await leases.listProfiles('t-twice')).toHaveLength(1);
    expect((await leases.getProfile({ tenant: 't-twice', id: 'shop' }))?.createdAtMs).toBe(NOW_MS);
  });

  it('skips index entries whose profile was never written (a create that crashed after its intent)', async () => {
    // What a crash between the index writes and the record's script leaves behind.
    await redis.sadd(`${prefix}tenant:t-crash:profiles`, 'ghost');
    await redis.sadd(`${prefix}profiles`, 't-crash/ghost');
    await leases.createProfile(profileOf('t-crash', 'real'), NOW_MS);

    expect((await leases.listProfiles('t-crash')).map((profile) => profile.id)).toEqual(['real']);
    const refs = await leases.listAllProfileRefs();
    expect(refs).toContainEqual({ tenant: 't-crash', id: 'real' });
    expect(refs).not.toContainEqual({ tenant: 't-crash', id: 'ghost' });
    expect(await leases.listLiveLeases()).toEqual([]);
  });
});
