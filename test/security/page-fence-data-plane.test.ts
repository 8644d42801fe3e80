import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idemKey, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** Through the data plane: a URL that is no web page costs the lease nothing. */
describe('the data plane refuses URLs that are no web page', () => {
  const prefix = uniquePrefix('fence-dp');
  let worker: TestBrowserWorker;
  let site: PageServer;

  beforeAll(async () => {
    [worker, site] = await Promise.all([startTestBrowserWorker({ prefix }), PageServer.start()]);
  });

  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('answers invalid_arguments before dispatch, leaving the sequence and the page as they were', async () => {
    const profile = '/v1/tenants/t1/profiles/fence-schemes';
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'fence-schemes', tenant: 't1', principal: 'owner', allowed_origins: [site.origin] },
    });
    const acquired = await worker.call('POST', `${profile}/leases`, {
      idempotencyKey: idemKey(),
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_schemes',
        attempt: 1,
        requested_expires_at_ms: Date.now() + 600_000,
      },
    });
    expect(acquired.status).toBe(201);
    const lease = `${profile}/leases/${acquired.body.lease_id as string}`;
    for (const url of [
      'file:///etc/passwd',
      'chrome://settings',
      'javascript:alert(1)',
      'data:text/html,x',
      'about:blank',
    ]) {
      const refused = await worker.call('POST', `${lease}/navigate`, { body: { sequence: 1, url } });
      expect(refused.status, url).toBe(422);
      expect(refused.body.error.code, url).toBe('invalid_arguments');
    }
    const view = await worker.call('GET', lease);
    expect(view.body).toMatchObject({ state: 'live', sequence: 0, effects: 0 });
    const navigated = await worker.call('POST', `${lease}/navigate`, {
      body: { sequence: 1, url: site.url('/pages/second.html') },
    });
    expect(navigated.status).toBe(200);
    expect(navigated.body.lease).toMatchObject({ sequence: 1, effects: 1 });
  });
});
