import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileRef } from '../../libs/contracts/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis, type RedisClient } from '../../queues/index.js';
import { createStoreProfile } from '../fixtures/lease-store.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { startRedisCluster, type TestRedisCluster } from '../fixtures/redis-cluster.js';

const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };
const NOW_MS = 1_767_225_600_000;

/**
 * The store's batched renewals — one `renewIdempotently` script per renewal, pipelined — on
 * one Redis and on a Redis Cluster, where the batch's profiles lie in different slots and nodes.
 */
describe.each(['one Redis', 'a Redis Cluster'] as const)('renewals in one batch on %s', (where) => {
  const prefix = uniquePrefix('renew-idempotently');
  let cluster: TestRedisCluster | undefined;
  let redis: RedisClient;
  let leases: RedisLeaseStore;
  const profiles: ProfileRef[] = Array.from({ length: 12 }, (_, index) => ({
    tenant: 'acme',
    id: `p${index}`,
  }));

  beforeAll(async () => {
    if (where === 'a Redis Cluster') {
      cluster = await startRedisCluster();
      redis = await connectRedis({ clusterNodes: [...cluster.nodes] }, 'worker', 'test-renewals');
    } else redis = await connectRedis(testRedisUrl(), 'worker', 'test-renewals');
    leases = new RedisLeaseStore(redis, `${prefix}:`);
  }, 60_000);

  afterAll(async () => {
    if (!cluster)
      await deletePrefixedKeys(redis as unknown as Parameters<typeof deletePrefixedKeys>[0], prefix);
    await closeRedis(redis);
    await cluster?.stop();
  }, 60_000);

  it('claims and renews each lease in its own slot, and replays every one when sent again', async () => {
    const held: string[] = [];
    for (const profile of profiles) {
      await createStoreProfile(leases, profile, NOW_MS);
      const acquired = await leases.acquire({
        profile,
        newLeaseId: `lse_${profile.id}aaaaaaaa`,
        scope: { tenant: 'acme', principal: 'alice', run_id: `run_${profile.id}`, attempt: 1 },
        providerRef: 'bw-1',
        requestedExpiresAtMs: NOW_MS + 60_000,
        nowMs: NOW_MS,
        caps: CAPS,
      });
      if (acquired.status !== 'created') throw new Error(`acquire: ${acquired.status}`);
      held.push(acquired.leaseId);
    }
    const renewals = profiles.map((profile, index) => ({
      profile,
      leaseId: held[index] as string,
      requestedExpiresAtMs: NOW_MS + 120_000 + index,
      idempotencyKey: `renew.${index}`,
      requestHash: `hash-${index}`,
    }));

    const first = await leases.renewIdempotently(renewals, NOW_MS, CAPS);
    expect(first.map((outcome) => outcome.status)).toEqual(profiles.map(() => 'renewed'));
    for (const [index, outcome] of first.entries())
      if (outcome.status === 'renewed') {
        expect(outcome.lease.id).toBe(held[index]);
        expect(outcome.lease.expiresAtMs).toBe(NOW_MS + 120_000 + index);
      }

    // Answered: the records hold their answers. Sent again, each replays; with another hash, conflicts.
    await leases.completeIdempotencies(
      renewals.map((renewal, index) => ({
        profile: renewal.profile,
        key: renewal.idempotencyKey,
        httpStatus: 200,
        body: `{"n":${index}}`,
      })),
    );
    const again = await leases.renewIdempotently(
      renewals.map((renewal) => ({
        ...renewal,
        requestedExpiresAtMs: renewal.requestedExpiresAtMs + 60_000,
      })),
      NOW_MS + 30_000,
      CAPS,
    );
    expect(again).toEqual(
      renewals.map((_, index) => ({ status: 'replay', httpStatus: 200, body: `{"n":${index}}` })),
    );
    const other = await leases.renewIdempotently(
      renewals.map((renewal) => ({ ...renewal, requestHash: 'another' })),
      NOW_MS,
      CAPS,
    );
    expect(other.map((outcome) => outcome.status)).toEqual(profiles.map(() => 'conflict'));
    for (const [index, profile] of profiles.entries())
      expect((await leases.getLease(profile, held[index] as string))?.expiresAtMs).toBe(
        NOW_MS + 120_000 + index,
      );
  });
});
