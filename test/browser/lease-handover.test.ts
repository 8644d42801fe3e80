import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** How long `/slow` takes to answer: an effect still running when its caller goes away. */
const SLOW_MS = 2_000;

/**
 * A run's next owner asks the lease what became of an effect its last owner sent and never had
 * answered (ADR-0127 d3, amended): applied, or never arrived — then skipped past, so a late copy is
 * refused — and never sent again.
 */
describe('a handed-over effect, learned from its lease', () => {
  const prefix = uniquePrefix('handover');
  let worker: TestBrowserWorker;
  let site: Server;
  let origin: string;
  const hits = new Map<string, number>();
  let slowArrived: () => void = () => undefined;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      response.setHeader('content-type', 'text/html');
      const answer = () => response.end('<!doctype html><title>page</title><h1>A page</h1>');
      if (path === '/slow') {
        slowArrived();
        setTimeout(answer, SLOW_MS);
      } else answer();
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await worker?.handle.close();
    await new Promise((resolve) => site.close(resolve));
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const handover = (path: string, sequence: number) =>
    worker.call('POST', `${path}/handover`, { body: { sequence } });

  it('answers `applied` for an effect that ran, and moves nothing', async () => {
    const { path } = await leaseOwnProfile(worker, 'ho', 'run_applied', origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: `${origin}/one` },
    });
    expect(navigated.status).toBe(200);
    const learned = await handover(path, 1);
    expect(learned.status).toBe(200);
    expect(learned.body).toMatchObject({ call: 'applied', code: null, lease: { sequence: 1, effects: 1 } });
  });

  it('skips past an effect that never arrived: `not_applied`, and a late copy of it is refused, never applied', async () => {
    const { path } = await leaseOwnProfile(worker, 'ho', 'run_skipped', origin);
    await worker.call('POST', `${path}/navigate`, { body: { sequence: 1, url: `${origin}/first` } });
    const learned = await handover(path, 2);
    expect(learned.body).toMatchObject({
      call: 'not_applied',
      code: null,
      lease: { sequence: 2, effects: 1 },
    });

    const late = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 2, url: `${origin}/late` },
    });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('sequence_mismatch');
    expect(hits.get('/late')).toBeUndefined();
    // Asked again (a next owner that stopped after the skip): the same answer, no second skip.
    const again = await handover(path, 2);
    expect(again.body).toMatchObject({ call: 'not_applied', lease: { sequence: 2, effects: 1 } });
    // The lease goes on from there.
    const next = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 3, url: `${origin}/next` },
    });
    expect(next.status).toBe(200);
  });

  it('runs an effect on after its caller goes away, and answers the hand-over once it has ended: `applied`, one request at the site', async () => {
    const { path } = await leaseOwnProfile(worker, 'ho', 'run_inflight', origin);
    const arrived = new Promise<void>((resolve) => {
      slowArrived = resolve;
    });
    const caller = new AbortController();
    const sent = fetch(`${worker.url}${path}/navigate`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ sequence: 1, url: `${origin}/slow` }),
      signal: caller.signal,
    }).catch((error: unknown) => error);
    await arrived;
    // The run worker that sent it stops: its request goes away with it.
    caller.abort();
    await sent;
    const learned = await handover(path, 1);
    expect(learned.body).toMatchObject({ call: 'applied', lease: { sequence: 1, effects: 1 } });
    const observed = await worker.call('POST', `${path}/observe`, { body: {} });
    expect(observed.body.observation.title).toBe('page');
    expect(hits.get('/slow')).toBe(1);
  });

  it('judges a lease this worker no longer holds from its record: what was applied stays applied, what never came is not applied', async () => {
    const { path } = await leaseOwnProfile(worker, 'ho', 'run_closed', origin);
    await worker.call('POST', `${path}/navigate`, { body: { sequence: 1, url: `${origin}/closed` } });
    await worker.call('POST', `${path}/close`, {
      body: { seal: false },
      idempotencyKey: `close-${Date.now()}`,
    });
    expect((await handover(path, 1)).body).toMatchObject({ call: 'applied', lease: { state: 'closed' } });
    expect((await handover(path, 2)).body).toMatchObject({ call: 'not_applied', lease: { sequence: 1 } });
  });
});
