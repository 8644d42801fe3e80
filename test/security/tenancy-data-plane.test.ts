import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PageFactory, PlaywrightPageFactory } from '../../libs/lease/index.js';
import { BrowserWorkerRegistry } from '../../libs/store/index.js';
import { idemKey, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { type PressSite, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * On the data plane (real Redis, real Chromium): every profile path names its
 * tenant, so tenant B, naming its own tenant's `shop`, never reaches tenant A's `shop`.
 */
describe('profiles scoped to their tenant (data plane)', () => {
  const prefix = uniquePrefix('tenancy-dp');
  let redis: Redis;
  let site: PressSite;
  let worker: TestBrowserWorker;

  const profilesOf = (tenant: string) => `/v1/tenants/${tenant}/profiles`;
  const leasesOf = (tenant: string, profile: string) => `${profilesOf(tenant)}/${profile}/leases`;

  async function createProfile(on: TestBrowserWorker, tenant: string, id: string, principal = 'owner') {
    return on.call('POST', profilesOf(tenant), {
      body: { id, tenant, principal, allowed_origins: [site.origin] },
    });
  }

  async function acquire(
    on: TestBrowserWorker,
    path: string,
    scope: { tenant: string; run_id: string; principal?: string },
  ) {
    return on.call('POST', path, {
      idempotencyKey: idemKey(),
      body: {
        principal: 'owner',
        attempt: 1,
        requested_expires_at_ms: on.clock.now() + 10 * 60_000,
        ...scope,
      },
    });
  }

  beforeAll(async () => {
    redis = new Redis(testRedisUrl());
    site = await startPressSite();
    worker = await startTestBrowserWorker({ prefix, workerId: 'bw-any' });
  });
  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('lets two tenants each create shop and lists each tenant its own', async () => {
    expect((await createProfile(worker, 'ta', 'shop', 'alice')).status).toBe(201);
    expect((await createProfile(worker, 'tb', 'shop', 'bob')).status).toBe(201);
    expect((await createProfile(worker, 'tb', 'shop', 'bob')).status).toBe(409);

    const listA = await worker.call('GET', profilesOf('ta'));
    expect(listA.status).toBe(200);
    expect(
      listA.body.profiles.map((p: { tenant: string; principal: string }) => [p.tenant, p.principal]),
    ).toEqual([['ta', 'alice']]);
    const shopB = await worker.call('GET', `${profilesOf('tb')}/shop`);
    expect(shopB.body).toMatchObject({ id: 'shop', tenant: 'tb', principal: 'bob', frame_origins: [] });
    expect((await worker.call('GET', `${profilesOf('tc')}/shop`)).status).toBe(404);
    // A body naming another tenant than its path is refused, not created there.
    const crossed = await worker.call('POST', profilesOf('tc'), {
      body: { id: 'shop', tenant: 'ta', principal: 'x', allowed_origins: [site.origin] },
    });
    expect(crossed.status).toBe(422);
    expect((await worker.call('GET', profilesOf('tc'))).body.profiles).toEqual([]);
  });

  it("keeps tenant B from acquiring, observing or closing tenant A's shop", async () => {
    const leaseA = await acquire(worker, leasesOf('ta', 'shop'), {
      tenant: 'ta',
      run_id: 'run_a',
      principal: 'alice',
    });
    expect(leaseA.status).toBe(201);
    const idA = leaseA.body.lease_id as string;
    const navigated = await worker.call('POST', `${leasesOf('ta', 'shop')}/${idA}/navigate`, {
      body: { sequence: 1, url: `${site.origin}/a` },
    });
    expect(navigated.status).toBe(200);

    // B's scope on A's path: another tenant's profile reads as absent; nothing is written.
    const intruded = await acquire(worker, leasesOf('ta', 'shop'), {
      tenant: 'tb',
      run_id: 'run_b',
      principal: 'bob',
    });
    expect(intruded.status).toBe(404);
    expect(intruded.body.error.code).toBe('not_found');

    // B names its own tenant's shop: a profile of its own, leased beside A's without conflict.
    const leaseB = await acquire(worker, leasesOf('tb', 'shop'), {
      tenant: 'tb',
      run_id: 'run_b',
      principal: 'bob',
    });
    expect(leaseB.status).toBe(201);
    expect(leaseB.body.lease_id).not.toBe(idA);

    // A's lease id under B's shop is no lease of B's: observe, read and close all answer 404.
    const underB = `${leasesOf('tb', 'shop')}/${idA}`;
    expect((await worker.call('POST', `${underB}/observe`, { body: {} })).status).toBe(404);
    expect((await worker.call('GET', underB)).status).toBe(404);
    const closed = await worker.call('POST', `${underB}/close`, {
      idempotencyKey: idemKey(),
      body: { seal: false },
    });
    expect(closed.status).toBe(404);

    // A's lease is untouched: live, one effect, and its page still answers A.
    const stillA = await worker.call('GET', `${leasesOf('ta', 'shop')}/${idA}`);
    expect(stillA.body).toMatchObject({
      state: 'live',
      effects: 1,
      scope: { tenant: 'ta', run_id: 'run_a' },
    });
    const observed = await worker.call('POST', `${leasesOf('ta', 'shop')}/${idA}/observe`, { body: {} });
    expect(observed.status).toBe(200);
    expect(observed.body.observation.url).toBe(`${site.origin}/a`);
    expect(site.hits.get('/a')).toBe(1);
    expect(worker.handle.leases.heldLeaseIds().sort()).toEqual([idA, leaseB.body.lease_id].sort());
  });

  it('serves pins tenantA/shop and tenantC/* only, and the registry finds each profile its closest worker', async () => {
    const pinned = await startTestBrowserWorker({ prefix, workerId: 'bw-pinned', pinned: 'ta/shop,tc/*' });
    try {
      await createProfile(worker, 'ta', 'other');
      await createProfile(worker, 'tc', 'desk');
      const served = await acquire(pinned, leasesOf('ta', 'other'), { tenant: 'ta', run_id: 'run_p1' });
      expect(served.status).toBe(409);
      expect(served.body.error.code).toBe('profile_unavailable');
      const otherTenant = await acquire(pinned, leasesOf('tb', 'shop'), { tenant: 'tb', run_id: 'run_p2' });
      expect(otherTenant.status).toBe(409);
      const wholeTenant = await acquire(pinned, leasesOf('tc', 'desk'), { tenant: 'tc', run_id: 'run_p3' });
      expect(wholeTenant.status).toBe(201);
      expect(wholeTenant.body.provider_ref).toBe('bw-pinned');

      const registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
      expect((await registry.findForProfile({ tenant: 'ta', id: 'shop' }))?.id).toBe('bw-pinned');
      expect((await registry.findForProfile({ tenant: 'tc', id: 'anything' }))?.id).toBe('bw-pinned');
      expect((await registry.findForProfile({ tenant: 'tb', id: 'shop' }))?.id).toBe('bw-any');
      expect((await registry.findForProfile({ tenant: 'ta', id: 'other' }))?.id).toBe('bw-any');
    } finally {
      await pinned.handle.close();
    }
  });

  it("opens each lease's pages with its profile's frame origins and subresource setting", async () => {
    const opened: Array<Parameters<PageFactory['open']>[0]> = [];
    const recording = await startTestBrowserWorker({
      prefix,
      workerId: 'bw-recording',
      pages: (browser) => {
        const real = new PlaywrightPageFactory(browser);
        return {
          open: (input) => {
            opened.push(input);
            return real.open(input);
          },
          openContexts: () => real.openContexts(),
        };
      },
    });
    try {
      const created = await recording.call('POST', profilesOf('td'), {
        body: {
          id: 'checkout',
          principal: 'owner',
          allowed_origins: [site.origin],
          frame_origins: ['https://pay.example'],
          subresources: 'allowed_origins',
        },
      });
      expect(created.status).toBe(201);
      expect(created.body).toMatchObject({
        frame_origins: ['https://pay.example'],
        subresources: 'allowed_origins',
      });
      await createProfile(recording, 'td', 'plain');

      expect(
        (await acquire(recording, leasesOf('td', 'checkout'), { tenant: 'td', run_id: 'run_f1' })).status,
      ).toBe(201);
      expect(
        (await acquire(recording, leasesOf('td', 'plain'), { tenant: 'td', run_id: 'run_f2' })).status,
      ).toBe(201);
      expect(opened).toEqual([
        expect.objectContaining({
          allowedOrigins: [site.origin],
          frameOrigins: ['https://pay.example'],
          subresources: 'allowed_origins',
        }),
        expect.objectContaining({ allowedOrigins: [site.origin], frameOrigins: [], subresources: 'any' }),
      ]);
    } finally {
      await recording.handle.close();
    }
  });
});
