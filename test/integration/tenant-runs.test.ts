import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunStore, type TenantRunQuery } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

describe("the run store: a tenant's runs list", () => {
  const prefix = `${uniquePrefix('tenant-runs')}:`;
  let redis: Redis;
  let store: RunStore;
  let nowMs = 1_800_000_000_000;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-tenant-runs');
    store = new RunStore(redis, prefix, () => nowMs);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  /** Every page of the query, its runs' ids in order. */
  async function allPages(tenant: string, query: TenantRunQuery): Promise<string[][]> {
    const pages: string[][] = [];
    let cursor = query.cursor;
    for (;;) {
      const page = await store.listTenantRuns(tenant, { ...query, ...(cursor ? { cursor } : {}) });
      pages.push(page.runs.map((run) => run.id));
      if (!page.nextCursor) return pages;
      cursor = page.nextCursor;
    }
  }

  it('lists newest first in pages, filtered, children included, another tenant never', async () => {
    const sessionA = await createTestSession(store, 'acme', { instructions: 'a' });
    const sessionB = await createTestSession(store, 'acme', { instructions: 'b' });
    const other = await createTestSession(store, 'globex', { instructions: 'c' });
    const ids: string[] = [];
    // Six runs and a child, two of them in the same ms (ordered by id within it).
    for (const [index, session] of [sessionA, sessionA, sessionB, sessionA, sessionB, sessionA].entries()) {
      ids.push((await submitStoreRun(store, session)).id);
      if (index !== 1) nowMs += 10;
    }
    const child = await submitStoreRun(store, sessionB, { parentRunId: ids[0] });
    await submitStoreRun(store, other, { tenant: 'globex' });
    ran(await store.claimRun(ids[3] ?? '', 1, 'w'));

    const listed = (await allPages('acme', { limit: 100 })).flat();
    const sameMs = [ids[1], ids[2]].sort().reverse();
    expect(listed).toEqual([child.id, ids[5], ids[4], ids[3], ...sameMs, ids[0]]);

    expect(await allPages('acme', { limit: 3 })).toEqual([
      listed.slice(0, 3),
      listed.slice(3, 6),
      listed.slice(6),
    ]);
    // A page cut inside the two runs of one ms goes on with the second.
    expect((await allPages('acme', { limit: 5 })).flat()).toEqual(listed);

    expect((await allPages('acme', { limit: 2, sessionId: sessionB })).flat()).toEqual([
      child.id,
      ids[4],
      ids[2],
    ]);
    expect((await allPages('acme', { limit: 2, statuses: ['running'] })).flat()).toEqual([ids[3]]);
    expect((await allPages('acme', { limit: 2, statuses: ['running', 'queued'] })).flat()).toEqual(listed);
    const created = (await store.getRun(ids[3] ?? ''))?.created_at_ms ?? 0;
    expect((await allPages('acme', { limit: 50, createdAfterMs: created })).flat()).toEqual(
      listed.slice(0, 3),
    );
    expect((await allPages('acme', { limit: 50, createdBeforeMs: created })).flat()).toEqual(listed.slice(4));
    expect((await allPages('acme', { limit: 50, sessionId: other })).flat()).toEqual([]);
    expect((await allPages('globex', { limit: 50 })).flat()).toHaveLength(1);
  });

  it('skips an entry whose run is missing and prunes it once it is old', async () => {
    const tenant = 'initech';
    const session = await createTestSession(store, tenant, { instructions: 'x' });
    const kept = await submitStoreRun(store, session, { tenant });
    await redis.zadd(`${prefix}{ten:${tenant}}:runs`, nowMs, 'run_inflight0000000000');
    expect((await store.listTenantRuns(tenant, { limit: 10 })).runs.map((run) => run.id)).toEqual([kept.id]);
    expect(await redis.zscore(`${prefix}{ten:${tenant}}:runs`, 'run_inflight0000000000')).not.toBeNull();
    nowMs += 120_000;
    expect((await store.listTenantRuns(tenant, { limit: 10 })).runs.map((run) => run.id)).toEqual([kept.id]);
    expect(await redis.zscore(`${prefix}{ten:${tenant}}:runs`, 'run_inflight0000000000')).toBeNull();
  });

  it('searches by run id prefix and by the input text, case aside, within the newest runs it may scan', async () => {
    const tenant = 'umbrella';
    const session = await createTestSession(store, tenant, { instructions: 'x' });
    const submit = async (input: unknown, laterMs = 1) => {
      nowMs += laterMs;
      const { run } = await store.submitRun({
        tenant,
        principal: 'alice',
        sessionId: session,
        input,
        limits: TEST_RUN_LIMITS,
        timeoutMs: 3_600_000,
      });
      return run.id;
    };
    const oldest = await submit({ text: 'Find the Opening hours\nof the shop' });
    const receipt = await submit({ text: 'Download the receipt' });
    const hours = await submit('opening hours, as plain text');
    const failed = await submit({ text: 'Pay the invoice' });
    ran(await store.claimRun(failed, 1, 'w'));

    expect((await allPages(tenant, { limit: 1, search: 'OPENING HOURS' })).flat()).toEqual([hours, oldest]);
    expect((await allPages(tenant, { limit: 10, search: receipt.slice(0, 12) })).flat()).toEqual([receipt]);
    expect((await allPages(tenant, { limit: 10, search: 'hours', statuses: ['running'] })).flat()).toEqual(
      [],
    );
    expect((await allPages(tenant, { limit: 10, search: 'nothing like it' })).flat()).toEqual([]);
    // Only the newest runs are searched: with room for three, the oldest is past the window.
    expect(
      (await store.listTenantRuns(tenant, { limit: 10, search: 'opening', searchWindow: 3 })).runs.map(
        (run) => run.id,
      ),
    ).toEqual([hours]);
    // Two runs in one ms: the window cuts between them by id, as the list orders them.
    const sameMs = [await submit({ text: 'same ms one' }), await submit({ text: 'same ms two' }, 0)];
    const newestFirst = (await allPages(tenant, { limit: 10, search: 'same ms' })).flat();
    expect(newestFirst).toHaveLength(2);
    const windowOfOne = await store.listTenantRuns(tenant, { limit: 10, search: 'same ms', searchWindow: 1 });
    expect(windowOfOne.runs.map((run) => run.id)).toEqual(newestFirst.slice(0, 1));
    expect(sameMs.sort()).toEqual([...newestFirst].sort());
  });
});
