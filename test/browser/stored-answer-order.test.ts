import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idemKey, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * An idempotent route's answer goes out once its store write is sent, not once Redis has
 * acknowledged it: the write is on the worker's Redis connection ahead of any later request's claim,
 * so a retry with the key still replays it. Here the acknowledgment is held back until the caller
 * has the answer: a route that waited for it would never answer.
 */
describe('the answer of an idempotent route and its stored copy', () => {
  const prefix = uniquePrefix('stored-answer-order');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let answered: () => void = () => {};

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix, env: { LEASE_EXPIRY_SWEEP_INTERVAL_MS: '3600000' } });
    redis = new Redis(testRedisUrl());
    const store = worker.handle.store as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
    const complete = (store.completeIdempotency as (...args: unknown[]) => Promise<unknown>).bind(store);
    store.completeIdempotency = (...args: unknown[]) => {
      const written = complete(...args);
      return new Promise((resolve) => {
        answered = () => resolve(written);
      });
    };
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'order', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
  });

  afterAll(async () => {
    answered();
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const acquire = (key: string) =>
    worker.call('POST', '/v1/tenants/t1/profiles/order/leases', {
      idempotencyKey: key,
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_order',
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + 10 * 60_000,
      },
    });

  it('answers before the stored answer is acknowledged, and a retry with the key replays it', async () => {
    const key = idemKey();
    const first = await acquire(key);
    answered();
    expect(first.status).toBe(201);
    const retried = await acquire(key);
    answered();
    expect(retried.headers.get('idempotent-replayed')).toBe('true');
    expect(retried.body).toEqual(first.body);

    const reattached = await acquire(idemKey());
    answered();
    expect(reattached.status).toBe(200);
    expect(reattached.body).toMatchObject({ lease_id: first.body.lease_id, created: false });
  });
});
