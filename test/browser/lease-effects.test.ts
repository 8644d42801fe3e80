import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  idemKey,
  leaseOwnProfile,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** Navigate and act on a lease: fenced by the action sequence, counted server-side. */
describe('effects on a lease', () => {
  const prefix = uniquePrefix('effects');
  let worker: TestBrowserWorker;
  let site: Server;
  let origin: string;
  const hits = new Map<string, number>();

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      response.setHeader('content-type', 'text/html');
      response.end(
        "<!doctype html><title>form</title><button onclick=\"document.body.insertAdjacentHTML('beforeend', '<p>clicked</p>')\">Press me</button>",
      );
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

  /** A lease on a profile of its own (one per test, so tests never contend). */
  async function lease(runId: string): Promise<Lease> {
    const { profileId, leaseId } = await leaseOwnProfile(worker, 'effects', runId, origin);
    return { profileId, leaseId };
  }

  interface Lease {
    profileId: string;
    leaseId: string;
  }
  const route = (lease: Lease, verb: string) =>
    `/v1/tenants/t1/profiles/${lease.profileId}/leases/${lease.leaseId}/${verb}`;
  const view = (lease: Lease) => `/v1/tenants/t1/profiles/${lease.profileId}/leases/${lease.leaseId}`;

  it('applies an action only when its sequence is exactly the next one; a repeated or skipped one applies nothing', async () => {
    const leaseId = await lease('run_seq');
    const first = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 1, url: `${origin}/one` },
    });
    expect(first.status).toBe(200);
    expect(first.body.lease).toMatchObject({ sequence: 1, effects: 1 });
    expect(first.body.observation.title).toBe('form');
    expect(typeof first.body.evidence_key).toBe('string');

    const repeated = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 1, url: `${origin}/repeat` },
    });
    expect(repeated.status).toBe(409);
    expect(repeated.body.error).toMatchObject({ code: 'sequence_mismatch', current_sequence: 1 });
    const skipped = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 3, url: `${origin}/skip` },
    });
    expect(skipped.status).toBe(409);
    expect(hits.get('/repeat')).toBeUndefined();
    expect(hits.get('/skip')).toBeUndefined();

    const current = await worker.call('GET', view(leaseId));
    expect(current.body).toMatchObject({ sequence: 1, effects: 1 });
  });

  it('acts by revision, advancing the sequence once per dispatched action, and counts each effect once', async () => {
    const leaseId = await lease('run_act');
    const navigated = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 1, url: `${origin}/act` },
    });
    const button = navigated.body.observation.elements.find(
      (element: { role: string; name: string }) => element.role === 'button' && element.name === 'Press me',
    );
    expect(button).toBeDefined();
    const acted = await worker.call('POST', route(leaseId, 'act'), {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(acted.status).toBe(200);
    expect(acted.body.lease).toMatchObject({ sequence: 2, effects: 2 });
    expect(acted.body.observation.text).toContain('clicked');

    // The same action sent again (a lost answer replayed by a careless client) is refused before dispatch.
    const replayed = await worker.call('POST', route(leaseId, 'act'), {
      body: {
        sequence: 2,
        args: { revision: acted.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(replayed.status).toBe(409);
    expect(replayed.body.error.code).toBe('sequence_mismatch');
    const observed = await worker.call('POST', route(leaseId, 'observe'), { body: {} });
    expect(observed.body.observation.text.match(/clicked/g)).toHaveLength(1);
    expect(observed.body.lease).toMatchObject({ sequence: 2, effects: 2 });
  });

  it('refuses an action the page engine rejects before dispatch without using up the sequence', async () => {
    const leaseId = await lease('run_stale');
    const navigated = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 1, url: `${origin}/stale` },
    });
    const button = navigated.body.observation.elements.find(
      (element: { role: string }) => element.role === 'button',
    );
    const stale = await worker.call('POST', route(leaseId, 'act'), {
      body: { sequence: 2, args: { revision: 'not-the-revision', element: button.ref, action: 'click' } },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('page_changed');
    const disallowed = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 2, url: 'https://elsewhere.invalid/' },
    });
    expect(disallowed.body.error.code).toBe('url_disallowed');
    const current = await worker.call('GET', view(leaseId));
    expect(current.body).toMatchObject({ sequence: 1, effects: 1 });
    const next = await worker.call('POST', route(leaseId, 'act'), {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: button.ref, action: 'click' },
      },
    });
    expect(next.status).toBe(200);
    expect(next.body.lease).toMatchObject({ sequence: 2, effects: 2 });
  });

  it('refuses every page call on a closed lease', async () => {
    const leaseId = await lease('run_closed');
    await worker.call('POST', route(leaseId, 'close'), { idempotencyKey: idemKey(), body: { seal: false } });
    const refused = await worker.call('POST', route(leaseId, 'navigate'), {
      body: { sequence: 1, url: `${origin}/late` },
    });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('lease_expired');
    expect(hits.get('/late')).toBeUndefined();
  });
});
