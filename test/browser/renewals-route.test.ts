import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_RENEWALS_PER_REQUEST } from '../../libs/contracts/index.js';
import { renewIdempotencyKey } from '../../libs/provider/idempotency-keys.js';
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

/**
 * `POST /v1/renewals`, many renewals of one browser worker's leases in one request, each
 * under its own idempotency (the single renew route's: one record per key, whichever route sent it),
 * each answered as the single route answers it. Against a real worker (Chromium, Redis) on a clock
 * the test moves.
 */
describe('the batch renewals route', () => {
  const prefix = uniquePrefix('renewals-route');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let leases: RedisLeaseStore;
  let client: DataPlaneClient;
  let profiles = 0;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    redis = new Redis(testRedisUrl());
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    client = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis?.disconnect();
  });

  /** A live lease on a profile of its own, granted `requestedMs` (at most 15 minutes). */
  async function lease(
    requestedMs = 60 * MINUTE_MS,
  ): Promise<{ profile: { tenant: string; id: string }; leaseId: string; expiresAtMs: number }> {
    profiles += 1;
    const profile = { tenant: 't1', id: `renewals-${profiles}` };
    await client.createProfile({ ...profile, principal: 'alice', allowed_origins: ['http://127.0.0.1:1'] });
    const { lease: acquired } = await client.acquire(
      profile,
      {
        tenant: 't1',
        principal: 'alice',
        run_id: `run_renewals${profiles}`,
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + requestedMs,
      },
      idemKey(),
    );
    return { profile, leaseId: acquired.lease_id, expiresAtMs: acquired.expires_at_ms };
  }

  /** A batch item as the run side's client sends it: the key its single renew would carry. */
  function item(
    held: { profile: { tenant: string; id: string }; leaseId: string },
    requestedExpiresAtMs: number,
  ) {
    return {
      tenant: held.profile.tenant,
      profile_id: held.profile.id,
      lease_id: held.leaseId,
      requested_expires_at_ms: requestedExpiresAtMs,
      idempotency_key: renewIdempotencyKey(held.leaseId, requestedExpiresAtMs),
    };
  }

  async function expiryOf(held: { profile: { tenant: string; id: string }; leaseId: string }) {
    return (await leases.getLease(held.profile, held.leaseId))?.expiresAtMs;
  }

  async function idempotencyRecords(): Promise<string[]> {
    return redis.keys(`${prefix}:*:idem:renew.*`);
  }

  it('renews every lease of the batch in one request, each to its own expiry', async () => {
    const held = [await lease(), await lease(), await lease()];
    worker.clock.advance(11 * MINUTE_MS);
    const asked = held.map((_, index) => worker.clock.now() + (10 + index) * MINUTE_MS);
    const results = await client.renewMany(
      held.map((one, index) => ({
        profile: one.profile,
        leaseId: one.leaseId,
        requestedExpiresAtMs: asked[index] ?? 0,
      })),
    );
    expect(results.map((result) => result.error)).toEqual([undefined, undefined, undefined]);
    for (const [index, one] of held.entries()) {
      expect(results[index]?.lease?.lease_id).toBe(one.leaseId);
      expect(results[index]?.lease?.expires_at_ms).toBe(asked[index]);
      expect(await expiryOf(one)).toBe(asked[index]);
      expect(asked[index]).toBeGreaterThan(one.expiresAtMs);
    }
  });

  it('answers a retried batch from its stored answers, renewing nothing twice', async () => {
    const held = [await lease(), await lease()];
    worker.clock.advance(11 * MINUTE_MS);
    const body = { renewals: held.map((one) => item(one, worker.clock.now() + 10 * MINUTE_MS)) };
    const first = await worker.call('POST', '/v1/renewals', { body });
    expect(first.status).toBe(200);
    expect(
      first.body.renewals.map((answer: { status: number; replayed: boolean }) => [
        answer.status,
        answer.replayed,
      ]),
    ).toEqual([
      [200, false],
      [200, false],
    ]);
    const renewedTo = await Promise.all(held.map(expiryOf));

    // Later, when asking the same would grant more: the stored answers, and the leases as they were.
    worker.clock.advance(3 * MINUTE_MS);
    const again = await worker.call('POST', '/v1/renewals', { body });
    expect(again.status).toBe(200);
    expect(again.body.renewals.map((answer: { replayed: boolean }) => answer.replayed)).toEqual([true, true]);
    expect(again.body.renewals.map((answer: { lease: unknown }) => answer.lease)).toEqual(
      first.body.renewals.map((answer: { lease: unknown }) => answer.lease),
    );
    expect(await Promise.all(held.map(expiryOf))).toEqual(renewedTo);
  });

  it('shares each key with the single renew route: either one replays what the other answered', async () => {
    const [batchFirst, singleFirst] = [await lease(), await lease()];
    worker.clock.advance(11 * MINUTE_MS);
    const asked = worker.clock.now() + 10 * MINUTE_MS;

    // Sent alone first (the run side's own renew, with its key): the batch item replays its answer.
    const alone = await worker.call(
      'POST',
      `/v1/tenants/t1/profiles/${singleFirst.profile.id}/leases/${singleFirst.leaseId}/renew`,
      {
        body: { requested_expires_at_ms: asked },
        idempotencyKey: renewIdempotencyKey(singleFirst.leaseId, asked),
      },
    );
    expect(alone.status).toBe(200);
    const batch = await worker.call('POST', '/v1/renewals', {
      body: { renewals: [item(batchFirst, asked), item(singleFirst, asked)] },
    });
    expect(batch.body.renewals[0]).toMatchObject({ status: 200, replayed: false });
    expect(batch.body.renewals[1]).toMatchObject({ status: 200, replayed: true, lease: alone.body });

    // Sent in the batch first: the same renewal sent alone replays the batch's answer, byte for byte.
    worker.clock.advance(MINUTE_MS);
    const replay = await worker.call(
      'POST',
      `/v1/tenants/t1/profiles/${batchFirst.profile.id}/leases/${batchFirst.leaseId}/renew`,
      {
        body: { requested_expires_at_ms: asked },
        idempotencyKey: renewIdempotencyKey(batchFirst.leaseId, asked),
      },
    );
    expect(replay.status).toBe(200);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(batch.body.renewals[0].lease);
    expect(await expiryOf(batchFirst)).toBe(batch.body.renewals[0].lease.expires_at_ms);

    // The key with another renewal is a conflict in the batch, as it is alone.
    const changed = await worker.call('POST', '/v1/renewals', {
      body: { renewals: [{ ...item(batchFirst, asked), requested_expires_at_ms: asked + MINUTE_MS }] },
    });
    expect(changed.body.renewals[0]).toMatchObject({ status: 409, error: { code: 'idempotency_conflict' } });
  });

  it('answers a renewal that cannot be made by itself, with the codes of the single route, and renews the rest', async () => {
    // The second lease was asked for 2 minutes only, so it expires while the first is still live.
    const [good, expiring] = [await lease(), await lease(2 * MINUTE_MS)];
    expect(expiring.expiresAtMs).toBeLessThan(good.expiresAtMs);
    worker.clock.advance(11 * MINUTE_MS);
    const asked = worker.clock.now() + 10 * MINUTE_MS;
    const missing = { profile: good.profile, leaseId: 'lse_nosuchlease0001' };

    const batch = await worker.call('POST', '/v1/renewals', {
      body: { renewals: [item(missing, asked), item(expiring, asked), item(good, asked)] },
    });
    expect(batch.status).toBe(200);
    const [gone, expired, renewed] = batch.body.renewals;
    expect(renewed).toMatchObject({ status: 200, lease: { lease_id: good.leaseId, expires_at_ms: asked } });
    expect(await expiryOf(good)).toBe(asked);

    // What the single route answers the same renewals (its own keys): the same statuses and codes.
    const single = async (held: { profile: { id: string }; leaseId: string }) =>
      worker.call('POST', `/v1/tenants/t1/profiles/${held.profile.id}/leases/${held.leaseId}/renew`, {
        body: { requested_expires_at_ms: asked },
        idempotencyKey: idemKey(),
      });
    const [goneAlone, expiredAlone] = [await single(missing), await single(expiring)];
    expect(gone).toMatchObject({ status: goneAlone.status, error: { code: goneAlone.body.error.code } });
    expect(gone).toMatchObject({ status: 404, error: { code: 'not_found' } });
    expect(expired).toMatchObject({
      status: expiredAlone.status,
      error: { code: expiredAlone.body.error.code },
    });
    expect(expired).toMatchObject({ status: 409, error: { code: 'lease_expired' } });
    // As the single route does, the expired lease is closed unsealed before the answer.
    expect(await leases.getLease(expiring.profile, expiring.leaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
      closeReason: 'expired',
    });

    // Through the run side's client: each refusal is the error `renew` would throw for it.
    const results = await client.renewMany([
      { profile: missing.profile, leaseId: missing.leaseId, requestedExpiresAtMs: asked + 1 },
      { profile: good.profile, leaseId: good.leaseId, requestedExpiresAtMs: asked + 1 },
    ]);
    const thrown = await client.renew(missing.profile, missing.leaseId, asked + 2).then(
      () => undefined,
      (error: unknown) => error,
    );
    expect(results[0]?.error).toMatchObject({
      code: (thrown as { code: string }).code,
      operation: 'renew',
      httpStatus: 404,
      serviceCode: 'not_found',
    });
    expect(results[1]?.lease?.expires_at_ms).toBe(asked + 1);
  });

  it(`refuses more than ${MAX_RENEWALS_PER_REQUEST} renewals, or a malformed one, whole and before writing anything`, async () => {
    const held = await lease();
    worker.clock.advance(11 * MINUTE_MS);
    const before = await idempotencyRecords();
    const asked = worker.clock.now() + 10 * MINUTE_MS;
    const many = Array.from({ length: MAX_RENEWALS_PER_REQUEST + 1 }, (_, index) =>
      item(held, asked + index),
    );
    const tooMany = await worker.call('POST', '/v1/renewals', { body: { renewals: many } });
    expect(tooMany).toMatchObject({
      status: 422,
      body: { error: { code: 'validation_failed', field: 'body.renewals' } },
    });

    const malformed = await worker.call('POST', '/v1/renewals', {
      body: { renewals: [item(held, asked), { ...item(held, asked + 1), lease_id: 'not-a-lease' }] },
    });
    expect(malformed).toMatchObject({
      status: 422,
      body: { error: { code: 'validation_failed', field: 'body.renewals.1.lease_id' } },
    });

    const repeated = await worker.call('POST', '/v1/renewals', {
      body: { renewals: [item(held, asked), item(held, asked)] },
    });
    expect(repeated).toMatchObject({ status: 422, body: { error: { code: 'validation_failed' } } });
    const empty = await worker.call('POST', '/v1/renewals', { body: { renewals: [] } });
    expect(empty).toMatchObject({ status: 422, body: { error: { code: 'validation_failed' } } });

    expect(await expiryOf(held)).toBe(held.expiresAtMs);
    expect(await idempotencyRecords()).toEqual(before);
  });

  it('refuses a batch without the data-plane token, and renews nothing', async () => {
    const held = await lease();
    worker.clock.advance(11 * MINUTE_MS);
    const body = { renewals: [item(held, worker.clock.now() + 10 * MINUTE_MS)] };
    for (const token of [null, 'x'.repeat(40)]) {
      const refused = await worker.call('POST', '/v1/renewals', { body, token });
      expect(refused).toMatchObject({ status: 401, body: { error: { code: 'unauthorized' } } });
    }
    const intruder = new DataPlaneClient({
      baseUrl: worker.url,
      token: 'not-the-data-plane-token-0123456789',
    });
    await expect(
      intruder.renewMany([
        {
          profile: held.profile,
          leaseId: held.leaseId,
          requestedExpiresAtMs: worker.clock.now() + MINUTE_MS,
        },
      ]),
    ).rejects.toMatchObject({ operation: 'renew_many', httpStatus: 401, serviceCode: 'unauthorized' });
    expect(await expiryOf(held)).toBe(held.expiresAtMs);
  });
});
