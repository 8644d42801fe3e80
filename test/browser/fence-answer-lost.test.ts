import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { redisLink } from '../../libs/telemetry/redis-link.js';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { freePort } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

type AdvanceSequence = (...args: unknown[]) => Promise<unknown>;

/**
 * The fence's advance is the one write an effect may not send twice; a Redis outage can swallow
 * its answer after the script ran, or refuse it before. Either way the page was not touched yet:
 * the effect waits the outage out and goes on once, it is not answered as an unknown outcome
 * (which fails the run). ioredis tells a command it gave up on as `Command timed out`.
 *
 * Another connection of the process stays down throughout, to a Redis that is not there: the
 * worker waits on its own Redis, not on every connection its process ever made.
 */
describe('an effect whose fence met a Redis outage', () => {
  const prefix = uniquePrefix('fence-lost');
  let worker: TestBrowserWorker;
  let site: Server;
  let origin: string;
  const hits = new Map<string, number>();
  let realAdvance: AdvanceSequence;
  let stray: Redis;

  beforeAll(async () => {
    stray = new Redis({ port: await freePort(), retryStrategy: () => 200, maxRetriesPerRequest: 0 });
    redisLink.watch(stray, 'stray');
    await new Promise((resolve) => stray.once('error', resolve));
    stray.on('error', () => undefined);
    expect(redisLink.up).toBe(false);
    worker = await startTestBrowserWorker({ prefix });
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>page</title><h1>A page</h1>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    const store = worker.handle.store as unknown as { advanceSequence: AdvanceSequence };
    realAdvance = store.advanceSequence.bind(store);
  });

  afterAll(async () => {
    stray?.disconnect();
    await worker?.handle.close();
    await new Promise((resolve) => site.close(resolve));
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  /** The next advance of an effect fails once: after the script ran (`landed`) or before it. */
  function failNextAdvance(landed: boolean): void {
    const store = worker.handle.store as unknown as { advanceSequence: AdvanceSequence };
    let failed = false;
    store.advanceSequence = async (...args: unknown[]) => {
      if (failed || args[4] !== true) return realAdvance(...args);
      failed = true;
      if (landed) await realAdvance(...args);
      throw new Error('Command timed out');
    };
  }

  for (const landed of [true, false])
    it(`navigates once and answers 200 when the advance's answer was lost ${landed ? 'after' : 'before'} it landed`, async () => {
      const runId = landed ? 'run_landed' : 'run_refused';
      const { path } = await leaseOwnProfile(worker, 'fl', runId, origin);
      failNextAdvance(landed);
      const navigated = await worker.call('POST', `${path}/navigate`, {
        body: { sequence: 1, url: `${origin}/${runId}` },
      });
      expect({ status: navigated.status, lease: navigated.body.lease }).toMatchObject({
        status: 200,
        lease: { sequence: 1, effects: 1 },
      });
      expect(hits.get(`/${runId}`)).toBe(1);
      // Another call with the same sequence (a replay) is still refused: only the same dispatch is told it landed.
      const replay = await worker.call('POST', `${path}/navigate`, {
        body: { sequence: 1, url: `${origin}/${runId}` },
      });
      expect({ status: replay.status, code: replay.body.error.code }).toEqual({
        status: 409,
        code: 'sequence_mismatch',
      });
      expect(hits.get(`/${runId}`)).toBe(1);
      // The lease goes on from there.
      const next = await worker.call('POST', `${path}/navigate`, {
        body: { sequence: 2, url: `${origin}/${runId}/next` },
      });
      expect(next.body.lease).toMatchObject({ sequence: 2, effects: 2 });
    });
});
