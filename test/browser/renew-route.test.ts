import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE_MS = 60_000;
const IDEM = { tenant: 't1', id: 'renew-idem' };
const AUTH = { tenant: 't1', id: 'renew-auth' };

/** A request the client sent, as it left: where, which headers, which body. */
interface Sent {
  url: string;
  headers: Record<string, string>;
  body: string | undefined;
}

/**
 * ADR-0127 d5: "The data plane gains an authenticated renew route under the same boundary, body
 * ceiling, and exact idempotency rule as acquire and close." Driven through the run side's own
 * client (`DataPlaneClient.renew`), so the route is whatever path the client uses; the requests it
 * sent are replayed as they were, or with their body changed, to check the rule at the route.
 */
describe('the renew route', () => {
  const prefix = uniquePrefix('renew-route');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let leases: RedisLeaseStore;
  const sent: Sent[] = [];
  let client: DataPlaneClient;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    redis = new Redis(testRedisUrl());
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    client = new DataPlaneClient({
      baseUrl: worker.url,
      token: TEST_TOKEN,
      fetch: async (input, init) => {
        sent.push({
          url: String(input),
          headers: { ...(init?.headers as Record<string, string>) },
          body: typeof init?.body === 'string' ? init.body : undefined,
        });
        return fetch(input, init);
      },
    });
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis?.disconnect();
  });

  async function leaseOn(profileId: string) {
    await client.createProfile({
      id: profileId,
      tenant: 't1',
      principal: 'alice',
      allowed_origins: ['http://127.0.0.1:1'],
    });
    const { lease } = await client.acquire(
      { tenant: 't1', id: profileId },
      {
        tenant: 't1',
        principal: 'alice',
        run_id: `run_${profileId.replaceAll('-', '')}`,
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + 60 * MINUTE_MS,
      },
      idemKey(),
    );
    return lease;
  }

  function lastRenew(): Sent {
    const request = sent.filter((candidate) => candidate.headers['idempotency-key']).at(-1);
    if (!request?.body) throw new Error('no renew was sent');
    return request;
  }

  async function resend(request: Sent, body: string, token = TEST_TOKEN) {
    const response = await fetch(request.url, {
      method: 'POST',
      headers: { ...request.headers, authorization: `Bearer ${token}` },
      body,
    });
    return {
      status: response.status,
      replayed: response.headers.get('idempotent-replayed'),
      body: await response.json(),
    };
  }

  it('replays the stored answer for the same key and body, and refuses the same key with another body', async () => {
    const lease = await leaseOn('renew-idem');
    worker.clock.advance(5 * MINUTE_MS);
    const first = await client.renew(IDEM, lease.lease_id, worker.clock.now() + 15 * MINUTE_MS);
    const firstRequest = lastRenew();
    expect(firstRequest.url).toMatch(/\/renew$/);
    // The lease moves on: a later renew, under its own key.
    worker.clock.advance(5 * MINUTE_MS);
    const second = await client.renew(IDEM, lease.lease_id, worker.clock.now() + 15 * MINUTE_MS);
    expect(second.expires_at_ms).toBeGreaterThan(first.expires_at_ms);

    // The first request again, byte for byte: its stored answer, not a new renewal.
    const replay = await resend(firstRequest, firstRequest.body ?? '');
    expect(replay).toMatchObject({ status: 200, replayed: 'true' });
    expect(replay.body.expires_at_ms).toBe(first.expires_at_ms);
    expect((await leases.getLease(IDEM, lease.lease_id))?.expiresAtMs).toBe(second.expires_at_ms);

    // The same key with another body is refused, and changes nothing.
    const changed = await resend(
      firstRequest,
      JSON.stringify({ requested_expires_at_ms: worker.clock.now() + 14 * MINUTE_MS }),
    );
    expect(changed).toMatchObject({ status: 409, body: { error: { code: 'idempotency_conflict' } } });
    expect((await leases.getLease(IDEM, lease.lease_id))?.expiresAtMs).toBe(second.expires_at_ms);
  });

  it('refuses a renew without the data-plane token, and renews nothing', async () => {
    const lease = await leaseOn('renew-auth');
    worker.clock.advance(5 * MINUTE_MS);
    const intruder = new DataPlaneClient({
      baseUrl: worker.url,
      token: 'not-the-data-plane-token-0123456789',
    });
    await expect(
      intruder.renew(AUTH, lease.lease_id, worker.clock.now() + 15 * MINUTE_MS),
    ).rejects.toMatchObject({ operation: 'renew', httpStatus: 401, serviceCode: 'unauthorized' });
    expect((await leases.getLease(AUTH, lease.lease_id))?.expiresAtMs).toBe(lease.expires_at_ms);

    // The request the real client sends, with the token swapped: refused the same way.
    await client.renew(AUTH, lease.lease_id, worker.clock.now() + 10 * MINUTE_MS);
    const request = lastRenew();
    const forged = await resend(
      { ...request, headers: { ...request.headers, 'idempotency-key': idemKey() } },
      JSON.stringify({ requested_expires_at_ms: worker.clock.now() + 15 * MINUTE_MS }),
      'x'.repeat(40),
    );
    expect(forged).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
  });
});
