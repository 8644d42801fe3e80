import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  idemKey,
  recordStoreCalls,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE_MS = 60_000;

/**
 * The single renew route takes the batch renewals' path — one script claims the
 * Idempotency-Key and renews, answering the lease as it is after — then stores its answer: two
 * round trips, where it took four (claim, renew, the lease read again, answer). Counted as the
 * worker's store calls (every method of its store), never timed.
 */
describe('the store calls of a renew through the data plane', () => {
  const prefix = uniquePrefix('renew-trips');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let leaseId: string;
  let calls: string[] = [];

  beforeAll(async () => {
    // No expiry sweep during the test: it reads leases on its own.
    worker = await startTestBrowserWorker({ prefix, env: { LEASE_EXPIRY_SWEEP_INTERVAL_MS: '3600000' } });
    redis = new Redis(testRedisUrl());
    calls = recordStoreCalls(worker);
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'trips', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
    const acquired = await worker.call('POST', '/v1/tenants/t1/profiles/trips/leases', {
      idempotencyKey: idemKey(),
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_trips',
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + 10 * MINUTE_MS,
      },
    });
    if (acquired.status !== 201) throw new Error(`acquire answered ${acquired.status}`);
    leaseId = acquired.body.lease_id;
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const renew = (key: string, requestedMs: number, lease = leaseId) =>
    worker.call('POST', `/v1/tenants/t1/profiles/trips/leases/${lease}/renew`, {
      idempotencyKey: key,
      body: { requested_expires_at_ms: requestedMs },
    });

  it('renews with the claiming renew script and the stored answer alone', async () => {
    calls.length = 0;
    const asked = worker.clock.now() + 12 * MINUTE_MS;
    const renewed = await renew(idemKey(), asked);
    expect(renewed.status).toBe(200);
    expect(renewed.body).toMatchObject({ lease_id: leaseId, expires_at_ms: asked, state: 'live' });
    expect(calls).toEqual(['renewIdempotently', 'completeIdempotency']);
  });

  it('replays a used key and refuses it with another body from the renew script alone', async () => {
    const key = idemKey();
    const asked = worker.clock.now() + 13 * MINUTE_MS;
    const first = await renew(key, asked);
    calls.length = 0;
    const replayed = await renew(key, asked);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toEqual(first.body);
    const conflict = await renew(key, asked + MINUTE_MS);
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');
    expect(calls).toEqual(['renewIdempotently', 'renewIdempotently']);
  });

  it('stores a refusal under its key, claimed by the script that refused', async () => {
    calls.length = 0;
    const refused = await renew(idemKey(), worker.clock.now() + MINUTE_MS, 'lse_nosuchlease0001');
    expect(refused.status).toBe(404);
    expect(refused.body.error.code).toBe('not_found');
    expect(calls).toEqual(['renewIdempotently', 'completeIdempotency']);
  });
});
