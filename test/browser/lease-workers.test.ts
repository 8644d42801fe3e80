import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { BrowserWorkerRegistry } from '../../libs/store/index.js';
import { requestLease, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE = 60_000;

describe('browser workers sharing one Redis', () => {
  const prefix = uniquePrefix('workers');
  const redis = new Redis(testRedisUrl());
  const started: TestBrowserWorker[] = [];

  afterAll(async () => {
    await Promise.all(started.map((worker) => worker.handle.close()));
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  async function start(workerId: string, pinned = '*'): Promise<TestBrowserWorker> {
    const worker = await startTestBrowserWorker({ prefix, workerId, pinned });
    started.push(worker);
    return worker;
  }

  function acquire(worker: TestBrowserWorker, profileId: string, runId: string) {
    return requestLease(worker, profileId, runId, Date.now() + MINUTE);
  }

  it('never hand out the same profile twice, however the acquires race', async () => {
    const [a, b] = await Promise.all([start('bw-a'), start('bw-b')]);
    if (!a || !b) throw new Error('workers did not start');
    await a.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'contested', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
    const contextsBefore = a.handle.browser.contexts().length + b.handle.browser.contexts().length;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, index) => acquire(index % 2 === 0 ? a : b, 'contested', `run_${index}`)),
    );
    const winners = answers.filter((answer) => answer.status === 201);
    expect(winners).toHaveLength(1);
    expect(
      answers
        .filter((answer) => answer.status === 409)
        .every((answer) => answer.body.error.code === 'profile_unavailable'),
    ).toBe(true);
    expect(answers.filter((answer) => answer.status !== 201 && answer.status !== 409)).toEqual([]);
    const contextsAfter = a.handle.browser.contexts().length + b.handle.browser.contexts().length;
    expect(contextsAfter).toBe(contextsBefore + 1);
  });

  it('registers each worker with its pinned profiles, so the run side can find the worker for a profile', async () => {
    await start('bw-pinned', 't1/shop,t1/bank');
    const registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    const pinned = await registry.findForProfile({ tenant: 't1', id: 'bank' });
    expect(pinned?.id).toBe('bw-pinned');
    expect(pinned?.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
    const anyWorker = await registry.findForProfile({ tenant: 't1', id: 'elsewhere' });
    expect(['bw-a', 'bw-b']).toContain(anyWorker?.id);
  });

  it('refuses a profile that is not pinned to the worker asked', async () => {
    const worker = started.find((candidate) => candidate.handle.leases.workerId === 'bw-pinned');
    if (!worker) throw new Error('no pinned worker');
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'unpinned', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
    const refused = await acquire(worker, 'unpinned', 'run_x');
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain('not served by worker bw-pinned');
  });

  it('revokes, unsealed, the live leases a restarted worker no longer holds the pages of', async () => {
    const first = await start('bw-restart');
    await first.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'restarted', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
    const lease = (await acquire(first, 'restarted', 'run_r')).body;
    // A second process with the same worker id, as after a crash: it holds no page for the lease.
    const second = await start('bw-restart');
    const view = await second.call('GET', `/v1/tenants/t1/profiles/restarted/leases/${lease.lease_id}`);
    expect(view.body).toMatchObject({ state: 'closed', close_reason: 'revoked', sealed: false });
    const fresh = await acquire(second, 'restarted', 'run_r');
    expect(fresh.status).toBe(201);
    expect(fresh.body.lease_id).not.toBe(lease.lease_id);
  });
});
