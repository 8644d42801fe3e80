import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packJson } from '../../libs/store/packed-json.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';

/**
 * The look the password and evidence-key tests rest on: "no Redis value holds X" proves something
 * only if every value was read. A marker stored in each type, packed where the store packs, is found.
 */
describe('every Redis value under a prefix', () => {
  const prefix = uniquePrefix('redis-values');
  const MARKER = 'Marker-Owl-7731';
  /** Long enough that packJson deflates it: the look must read through the packing. */
  const packed = packJson({ kind: 'input', text: `${MARKER} ${'padding '.repeat(20)}` });
  let redis: Redis;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl());
    await redis.set(`${prefix}:string`, packed);
    await redis.hset(`${prefix}:hash`, 'b', 'plain', 'a', packed);
    await redis.rpush(`${prefix}:list`, 'first', packed);
    await redis.sadd(`${prefix}:set`, `member ${MARKER}`, 'other');
    await redis.zadd(`${prefix}:zset`, 1, `member ${MARKER}`);
    await redis.xadd(`${prefix}:stream`, '*', 'data', packed);
    await redis.set(`${prefix}{run:r1}:run`, `braced ${MARKER}`);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await redis.del(`${prefix}{run:r1}:run`);
    redis.disconnect();
  });

  it('reads every type, packed values inflated, under braced key names too', async () => {
    expect(Buffer.isBuffer(packed)).toBe(true);
    const values = await storedValues(redis, prefix);
    const holding = [...values.entries()].filter(([, text]) => text.includes(MARKER)).map(([key]) => key);
    expect(holding).toEqual(
      ['string', 'hash', 'list', 'set', 'zset', 'stream']
        .map((name) => `${prefix}:${name}`)
        .concat(`${prefix}{run:r1}:run`)
        .sort(),
    );
  });

  it('says the same text for a hash whose fields were written in another order', async () => {
    await redis.hset(`${prefix}:hash2`, 'a', packed, 'b', 'plain');
    const values = await storedValues(redis, prefix);
    expect(values.get(`${prefix}:hash2`)).toBe(values.get(`${prefix}:hash`));
  });
});
