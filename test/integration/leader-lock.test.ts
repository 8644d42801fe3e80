import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LeaderLock } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

describe('the sweeper leader lock', () => {
  let redis: Redis;
  const key = `${uniquePrefix('lock')}:sweeper:lock`;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-lock');
  });
  afterAll(async () => {
    await redis.del(key);
    await closeRedis(redis);
  });

  it('lets one replica hold it while the other stays idle, and hands it over on release', async () => {
    const first = new LeaderLock(redis, key, 5_000);
    const second = new LeaderLock(redis, key, 5_000);
    expect(await first.tryHold()).toBe(true);
    expect(await second.tryHold()).toBe(false);
    expect(await first.tryHold()).toBe(true);
    await first.release();
    expect(await second.tryHold()).toBe(true);
    expect(await first.tryHold()).toBe(false);
    await second.release();
  });

  it('passes to another replica once a dead holder stops renewing it', async () => {
    const dead = new LeaderLock(redis, key, 300);
    const alive = new LeaderLock(redis, key, 300);
    expect(await dead.tryHold()).toBe(true);
    expect(await alive.tryHold()).toBe(false);
    // The dead holder never renews: the lock lapses after its 300 ms and the live replica takes it.
    await expect.poll(() => alive.tryHold()).toBe(true);
    await alive.release();
  });

  it('never releases a lock that has passed to another replica', async () => {
    const stale = new LeaderLock(redis, key, 200);
    const holder = new LeaderLock(redis, key, 5_000);
    expect(await stale.tryHold()).toBe(true);
    // The stale replica stops renewing: wait until its lock has lapsed (-2: no such key).
    await expect.poll(() => redis.pttl(key)).toBe(-2);
    expect(await holder.tryHold()).toBe(true);
    // The stale replica still believes it holds the lock; its release must leave the new holder's.
    expect(stale.held).toBe(true);
    await stale.release();
    expect(await redis.pttl(key)).toBeGreaterThan(1_000);
    expect(await stale.tryHold()).toBe(false);
    await holder.release();
    expect(await redis.exists(key)).toBe(0);
  });
});
