import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LeaseStore } from '../../libs/lease/index.js';
import {
  idemKey,
  recordStoreCalls,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * A reattach answers from what one store call tells (the acquire script claims the
 * Idempotency-Key, admits, and answers the live lease), then stores its answer: two round trips,
 * where it took five (claim, profile with its sealed state, acquire, lease, answer). Counted as the
 * worker's store calls, never timed.
 */
describe('the store calls of an acquire through the data plane', () => {
  const prefix = uniquePrefix('reattach-trips');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let calls: string[] = [];

  beforeAll(async () => {
    // No expiry sweep during the test: it reads leases on its own.
    worker = await startTestBrowserWorker({ prefix, env: { LEASE_EXPIRY_SWEEP_INTERVAL_MS: '3600000' } });
    redis = new Redis(testRedisUrl());
    calls = recordStoreCalls(worker, [
      'getProfile',
      'acquire',
      'sealedState',
      'getLease',
      'claimIdempotency',
      'completeIdempotency',
      'releaseIdempotency',
    ] satisfies ReadonlyArray<keyof LeaseStore>);
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'trips', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const body = () => ({
    tenant: 't1',
    principal: 'owner',
    run_id: 'run_trips',
    attempt: 1,
    requested_expires_at_ms: worker.clock.now() + 30 * 60_000,
  });
  const acquire = (key: string, payload: unknown = body()) =>
    worker.call('POST', '/v1/tenants/t1/profiles/trips/leases', { idempotencyKey: key, body: payload });

  it('creates with the acquire script, the sealed state read after publication, and the stored answer', async () => {
    calls.length = 0;
    expect((await acquire(idemKey())).status).toBe(201);
    expect(calls).toEqual(['acquire', 'sealedState', 'completeIdempotency']);
  });

  it('reattaches with the acquire script and the stored answer alone', async () => {
    calls.length = 0;
    const again = await acquire(idemKey());
    expect(again.status).toBe(200);
    expect(again.body.created).toBe(false);
    expect(calls).toEqual(['acquire', 'completeIdempotency']);
  });

  it('replays a used key and refuses it with another body from the acquire script alone', async () => {
    const key = idemKey();
    const first = await acquire(key);
    calls.length = 0;
    const replayed = await acquire(key);
    expect(replayed.status).toBe(first.status);
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toEqual(first.body);
    const conflict = await acquire(key, { ...body(), attempt: 2 });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');
    expect(calls).toEqual(['acquire', 'acquire']);
  });

  it('stores a refusal under its key, claimed by the script that refused', async () => {
    const key = idemKey();
    calls.length = 0;
    const refused = await acquire(key, { ...body(), run_id: 'run_other' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('profile_unavailable');
    expect(calls).toEqual(['acquire', 'completeIdempotency']);
    const replayed = await acquire(key, { ...body(), run_id: 'run_other' });
    expect(replayed.headers.get('idempotent-replayed')).toBe('true');
    expect(replayed.body).toEqual(refused.body);
  });
});
