import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { idemKey, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { framePage, imagePage, LoopbackSite, socketPage } from './egress-rig.js';

/**
 * DESIGN §12, the fleet's network is not the browser's: every request of a lease's pages crosses
 * the browser worker's egress proxy, which refuses an address the guard refuses. A stand-in server
 * on the refused address counts what reaches it: nothing may.
 */

/** A lease on a profile written straight to the store, as one made before the guard (or the setting) was. */
async function leaseOnStoredProfile(
  worker: TestBrowserWorker,
  id: string,
  origins: { allowed: string[]; frames?: string[] },
): Promise<string> {
  await worker.handle.store.createProfile(
    {
      id,
      tenant: 't1',
      principal: 'owner',
      allowed_origins: origins.allowed,
      frame_origins: origins.frames ?? [],
      subresources: 'any',
      protected: false,
    },
    Date.now(),
  );
  const acquired = await worker.call('POST', `/v1/tenants/t1/profiles/${id}/leases`, {
    idempotencyKey: idemKey(),
    body: {
      tenant: 't1',
      principal: 'owner',
      run_id: `run_${id}`,
      attempt: 1,
      requested_expires_at_ms: Date.now() + 600_000,
    },
  });
  expect(acquired.status).toBe(201);
  return `/v1/tenants/t1/profiles/${id}/leases/${acquired.body.lease_id as string}`;
}

function pageDriver(worker: TestBrowserWorker, lease: string) {
  let sequence = 0;
  return {
    async navigate(url: string) {
      sequence += 1;
      const answer = await worker.call('POST', `${lease}/navigate`, { body: { sequence, url } });
      return answer;
    },
    /** Waits (by the predicate's own polling, up to 5 s) for the page's `out` button to say `name`. */
    async waitFor(name: string) {
      const answer = await worker.call('POST', `${lease}/observe`, {
        body: { args: { wait_for: { role: 'button', name, wait_ms: 5_000 } } },
      });
      expect(answer.status).toBe(200);
      return answer.body;
    },
    async click(name: string) {
      const observed = await worker.call('POST', `${lease}/observe`, { body: {} });
      const element = observed.body.observation.elements.find(
        (candidate: { name: string }) => candidate.name === name,
      );
      sequence += 1;
      return worker.call('POST', `${lease}/act`, {
        body: {
          sequence,
          args: { revision: observed.body.observation.revision, element: element.ref, action: 'click' },
        },
      });
    },
  };
}

describe('a browser worker that allows only 127.0.0.2/32', () => {
  const prefix = uniquePrefix('egress-narrow');
  let worker: TestBrowserWorker;
  let site: LoopbackSite;
  let standIn: PageServer;

  beforeAll(async () => {
    [worker, site, standIn] = await Promise.all([
      startTestBrowserWorker({ prefix, env: { LEASEHOLD_EGRESS_ALLOW_CIDRS: '127.0.0.2/32' } }),
      LoopbackSite.start('127.0.0.2'),
      PageServer.start(),
    ]);
  });

  afterAll(async () => {
    await worker?.handle.close();
    await Promise.all([site?.close(), standIn?.close()]);
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('refuses a profile allowing the metadata address or loopback in any spelling, 422 at creation', async () => {
    for (const origin of [
      'http://169.254.169.254',
      'http://[::ffff:127.0.0.1]',
      'http://2130706433',
      'http://0x7f.1:8080',
      'http://[::127.0.0.1]',
      'http://standin.localhost',
    ]) {
      const answer = await worker.call('POST', '/v1/tenants/t1/profiles', {
        body: { id: 'refused', tenant: 't1', principal: 'owner', allowed_origins: [site.origin, origin] },
      });
      expect({ origin, status: answer.status }).toEqual({ origin, status: 422 });
      expect(answer.body.error.code).toBe('validation_failed');
      expect(answer.body.error.message).toContain('LEASEHOLD_EGRESS_ALLOW_CIDRS');
    }
    const framed = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: {
        id: 'refused',
        tenant: 't1',
        principal: 'owner',
        allowed_origins: [site.origin],
        frame_origins: ['http://10.0.0.1'],
      },
    });
    expect(framed.status).toBe(422);
    const allowed = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: {
        id: 'names-judged-later',
        tenant: 't1',
        principal: 'owner',
        allowed_origins: [site.origin, 'https://example.com', 'http://redis:6379'],
      },
    });
    expect(allowed.status).toBe(201);
  });

  it('loads the allowed page, and refuses a *.localhost name at connection: 0 requests reach the stand-in', async () => {
    const named = `http://standin.localhost:${standIn.port}`;
    const lease = await leaseOnStoredProfile(worker, 'by-name', { allowed: [site.origin, named] });
    const pages = pageDriver(worker, lease);
    const image = site.page('/named-image', imagePage(`${named}/pages/pixel.png`));
    expect((await pages.navigate(image)).status).toBe(200);
    await pages.waitFor('image: failed');
    await pages.navigate(`${named}/pages/second.html`);
    expect(site.log).toContain('/named-image');
    expect(standIn.log).toEqual([]);
  });

  it('refuses a redirect, a click, a frame, an image and a WebSocket to a refused address: 0 requests at the stand-in', async () => {
    const refused = standIn.origin; // http://127.0.0.1:PORT
    const lease = await leaseOnStoredProfile(worker, 'every-way', {
      allowed: [site.origin, refused],
      frames: [refused],
    });
    const pages = pageDriver(worker, lease);

    await pages.navigate(site.redirect('/redirect', `${refused}/pages/second.html`));
    await pages.navigate(site.page('/link', `<a href="${refused}/pages/second.html">Go there</a>`));
    await pages.click('Go there');
    await pages.navigate(site.page('/frame', framePage(`${refused}/pages/second.html`)));
    await pages.waitFor('frame: finished');
    await pages.navigate(site.page('/image', imagePage(`${refused}/pages/pixel.png`)));
    await pages.waitFor('image: failed');
    await pages.navigate(site.page('/socket', socketPage(`ws://127.0.0.1:${standIn.port}/socket`)));
    await pages.waitFor('socket: failed');
    await pages.navigate(`${refused}/pages/second.html`);

    expect(site.log).toEqual(expect.arrayContaining(['/redirect', '/link', '/frame', '/image', '/socket']));
    expect(standIn.log).toEqual([]);
  });
});

describe('a browser worker that allows loopback (the default outside production)', () => {
  const prefix = uniquePrefix('egress-loopback');
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

  it("serves pages on loopback, and still refuses the fleet's own ports: the data plane's, by address and by localhost name", async () => {
    const dataPlanePort = Number(new URL(worker.url).port);
    const dataPlane = `http://127.0.0.1:${dataPlanePort}`;
    const created = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'own-port', tenant: 't1', principal: 'owner', allowed_origins: [site.origin, dataPlane] },
    });
    expect(created.status).toBe(422);
    expect(created.body.error.message).toContain("the fleet's own ports");

    const lease = await leaseOnStoredProfile(worker, 'own-ports', {
      allowed: [site.origin, dataPlane, `http://localhost:${dataPlanePort}`],
    });
    const pages = pageDriver(worker, lease);
    const served = await pages.navigate(site.url('/pages/second.html'));
    expect(served.status).toBe(200);
    expect(served.body.observation.text.length).toBeGreaterThan(0);

    for (const url of [`${dataPlane}/healthz`, `http://localhost:${dataPlanePort}/healthz`]) {
      // The proxy answers a refused plain-http request 403 with no body, which Chromium turns into
      // its own error page: the navigation fails, as a refused https one does, and nothing of the
      // data plane's answer (`{"status":"ok",…}`) reaches the page.
      const answer = await pages.navigate(url);
      expect(answer.status, url).not.toBe(200);
      const seen = await worker.call('POST', `${lease}/observe`, { body: {} });
      expect(seen.body.observation.text, url).not.toContain('status');
    }
    const image = site.addPage('own-port-image.html', imagePage(`${dataPlane}/healthz`));
    await pages.navigate(image);
    await pages.waitFor('image: failed');
  });
});
