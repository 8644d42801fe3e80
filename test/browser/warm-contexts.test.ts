import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeKey } from '../../libs/config/index.js';
import { DEFAULT_LEASE_CAPS, sealState, WarmPool } from '../../libs/lease/index.js';
import {
  idemKey,
  requestLease,
  startTestBrowserWorker,
  TEST_SEAL_KEY,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE = 60_000;
const PER_PROFILE = 2;

/**
 * Warm contexts. A worker keeps ready contexts of the profiles it serves — sealed state
 * restored, origin guard attached — hands one over on acquire, refills in the background, is
 * bounded by count and memory, and never hands over a context of an older seal.
 */
// Each test makes several contexts one after another; a loaded machine takes a while over them.
describe('warm contexts of a browser worker', { timeout: 120_000 }, () => {
  const prefix = uniquePrefix('warm');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let site: Server;
  let siteOrigin: string;
  /** Another origin of the same server, which no profile allows. */
  let otherOrigin: string;
  let profileCount = 0;
  /** Answers of `/hang` requests held back until the test releases them. */
  const hanging: Array<() => void> = [];
  const sealKey = decodeKey(TEST_SEAL_KEY) as Buffer;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({
      prefix,
      env: { BROWSER_WARM_CONTEXTS: String(PER_PROFILE), BROWSER_WARM_POOL_MB: '1024' },
    });
    redis = new Redis(testRedisUrl());
    site = createServer((request, response) => {
      const url = new URL(request.url ?? '/', 'http://site');
      response.setHeader('content-type', 'text/html');
      if (url.pathname === '/hang') {
        // Answered only when the test lets it go: a page call held under way.
        hanging.push(() => response.end('<!doctype html><title>slow</title><p>at last</p>'));
        return;
      }
      const value = url.searchParams.get('set');
      if (value) response.setHeader('set-cookie', `session=${value}; Path=/; Max-Age=3600`);
      response.end(`<!doctype html><title>site</title><p>cookie is ${request.headers.cookie ?? 'none'}</p>`);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    const port = (site.address() as AddressInfo).port;
    siteOrigin = `http://127.0.0.1:${port}`;
    otherOrigin = `http://localhost:${port}`;
  });

  afterAll(async () => {
    for (const release of hanging.splice(0)) release();
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
    await new Promise((resolve) => site.close(resolve));
  });

  const pool = (): WarmPool => {
    const warm = worker.handle.warmPool;
    if (!warm) throw new Error('the worker has no warm pool');
    return warm;
  };
  const ref = (id: string) => ({ tenant: 't1', id });

  async function newProfile(): Promise<string> {
    profileCount += 1;
    const id = `w${profileCount}`;
    const created = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id, tenant: 't1', principal: 'owner', allowed_origins: [siteOrigin] },
    });
    expect(created.status).toBe(201);
    return id;
  }

  async function acquire(profileId: string, runId: string): Promise<string> {
    const answer = await requestLease(worker, profileId, runId, worker.clock.now() + 60 * MINUTE);
    expect(answer.status).toBe(201);
    return answer.body.lease_id as string;
  }

  function navigate(profileId: string, leaseId: string, sequence: number, url: string) {
    return worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases/${leaseId}/navigate`, {
      body: { sequence, url, deadline_ms: 15_000 },
    });
  }

  async function close(profileId: string, leaseId: string, seal: boolean): Promise<void> {
    const closed = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases/${leaseId}/close`, {
      idempotencyKey: idemKey(),
      body: { seal },
    });
    expect(closed.status).toBe(200);
  }

  /** Seals `session=<value>` into the profile through a lease of this worker. */
  async function sealCookie(profileId: string, value: string): Promise<void> {
    const leaseId = await acquire(profileId, `run_seal_${value}`);
    expect((await navigate(profileId, leaseId, 1, `${siteOrigin}/?set=${value}`)).status).toBe(200);
    await close(profileId, leaseId, true);
  }

  /** The browser context whose page is at `marker` (navigated there by the lease under test). */
  function contextAt(marker: string): BrowserContext | undefined {
    return worker.handle.browser
      .contexts()
      .find((context) => context.pages().some((page) => page.url().includes(marker)));
  }

  /** The value of one sample line of the worker's `/metrics` (0 when it has none yet). */
  async function sample(line: string): Promise<number> {
    const text = await (await fetch(`${worker.url}/metrics`)).text();
    const row = text.split('\n').find((candidate) => candidate.startsWith(`${line} `));
    return row ? Number(row.slice(line.length + 1)) : 0;
  }
  const WARM = 'leasehold_lease_contexts_total{source="warm"}';
  const COLD = 'leasehold_lease_contexts_total{source="cold"}';

  it('hands over a warm context with the sealed state restored and the origin guard attached', async () => {
    const profileId = await newProfile();
    await sealCookie(profileId, 'first');
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
    const warmed = new Set(worker.handle.browser.contexts());
    const [warmBefore, coldBefore] = [await sample(WARM), await sample(COLD)];

    const leaseId = await acquire(profileId, 'run_warm');
    // An operator sees where each new lease's context came from.
    expect([await sample(WARM), await sample(COLD)]).toEqual([warmBefore + 1, coldBefore]);
    const page = await navigate(profileId, leaseId, 1, `${siteOrigin}/?marker=warm1`);
    expect(page.status).toBe(200);
    expect(page.body.observation.text).toContain('cookie is session=first');
    // The lease's context existed before its acquire: it was one of the pool's.
    const leased = contextAt('marker=warm1');
    expect(leased).toBeDefined();
    expect(warmed.has(leased as BrowserContext)).toBe(true);

    const refused = await navigate(profileId, leaseId, 2, `${otherOrigin}/`);
    expect(refused.body.error?.code).toBe('url_disallowed');
    await close(profileId, leaseId, false);
  });

  it('refills the pool in the background after an acquire takes a context', async () => {
    const profileId = await newProfile();
    await sealCookie(profileId, 'refill');
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
    const leaseId = await acquire(profileId, 'run_refill');
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
    await close(profileId, leaseId, false);
  });

  it('never hands over a context warmed before the profile was sealed again', async () => {
    const profileId = await newProfile();
    await sealCookie(profileId, 'old');
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
    const warmed = new Set(worker.handle.browser.contexts());

    // Sealed again elsewhere (another worker's lease, as after a re-pin): this worker's pool is
    // not told, and the test clock stands still, so only the seal generation tells the states apart.
    const store = worker.handle.store;
    const now = worker.clock.now();
    const published = await store.acquire({
      profile: ref(profileId),
      newLeaseId: `lse_elsewhere_${profileId}`,
      scope: { tenant: 't1', principal: 'owner', run_id: 'run_elsewhere', attempt: 1 },
      providerRef: 'bw-elsewhere',
      requestedExpiresAtMs: now + MINUTE,
      nowMs: now,
      caps: DEFAULT_LEASE_CAPS,
    });
    expect(published.status).toBe('created');
    const newer = sealState(
      {
        cookies: [
          {
            name: 'session',
            value: 'new',
            domain: '127.0.0.1',
            path: '/',
            expires: -1,
            httpOnly: false,
            secure: false,
            sameSite: 'Lax',
          },
        ],
        origins: [],
      },
      sealKey,
      `t1/${profileId}`,
    );
    await store.beginClose(ref(profileId), `lse_elsewhere_${profileId}`, now, 'closed');
    expect((await store.finishClose(ref(profileId), `lse_elsewhere_${profileId}`, now, newer)).sealed).toBe(
      true,
    );
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);

    const leaseId = await acquire(profileId, 'run_after_reseal');
    const page = await navigate(profileId, leaseId, 1, `${siteOrigin}/?marker=resealed`);
    expect(page.body.observation.text).toContain('cookie is session=new');
    expect(warmed.has(contextAt('marker=resealed') as BrowserContext)).toBe(false);
    await close(profileId, leaseId, false);
  });

  it('acquires with an empty pool: a context made from the sealed state there and then', async () => {
    const profileId = await newProfile();
    await sealCookie(profileId, 'cold');
    await pool().settled();
    await pool().drain();
    expect(pool().size(ref(profileId))).toBe(0);
    const [warmBefore, coldBefore] = [await sample(WARM), await sample(COLD)];

    const leaseId = await acquire(profileId, 'run_cold');
    expect([await sample(WARM), await sample(COLD)]).toEqual([warmBefore, coldBefore + 1]);
    const page = await navigate(profileId, leaseId, 1, `${siteOrigin}/?marker=cold`);
    expect(page.body.observation.text).toContain('cookie is session=cold');
    const refused = await navigate(profileId, leaseId, 2, `${otherOrigin}/`);
    expect(refused.body.error?.code).toBe('url_disallowed');
    await close(profileId, leaseId, false);
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
  });

  it('keeps at most its count per profile and its memory bound in all', async () => {
    const profiles = [await newProfile(), await newProfile(), await newProfile()];
    // 100 MiB at 48 MiB a context: two contexts in all, however many profiles want four each.
    const bounded = new WarmPool({
      pages: worker.handle.pages,
      store: worker.handle.store,
      sealKey,
      limits: { perProfile: 4, poolMb: 100 },
      logger: silentLogger(),
    });
    try {
      for (const profileId of profiles) bounded.want(ref(profileId));
      await bounded.settled();
      expect(bounded.maxContexts).toBe(2);
      expect(bounded.size()).toBe(2);
    } finally {
      await bounded.close();
    }
    // The worker's own pool: its count per profile, whatever memory is left.
    const profileId = await newProfile();
    pool().want(ref(profileId));
    await pool().settled();
    expect(pool().size(ref(profileId))).toBe(PER_PROFILE);
    expect(pool().size()).toBeLessThanOrEqual(pool().maxContexts);
  });

  it('makes no warm context while a page call of a live lease is under way, and fills once it ends', async () => {
    // On a 2-core machine eager refills starved live pages (test/chaos/fifty-runs stranded runs
    // with four warm contexts a profile): the pool yields to the leases' page calls.
    const busy = await newProfile();
    const leaseId = await acquire(busy, 'run_busy');
    await pool().settled();
    const navigating = navigate(busy, leaseId, 1, `${siteOrigin}/hang`);
    while (hanging.length === 0) await new Promise((resolve) => setTimeout(resolve, 20));

    const waiting = await newProfile();
    pool().want(ref(waiting));
    // Long enough for a refill to make a context on a loaded machine, were it allowed to.
    let filledWhileBusy = false;
    for (let waited = 0; waited < 3_000 && !filledWhileBusy; waited += 50) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      filledWhileBusy = pool().size(ref(waiting)) > 0;
    }
    for (const release of hanging.splice(0)) release();
    expect((await navigating).status).toBe(200);
    expect(filledWhileBusy).toBe(false);
    await pool().settled();
    expect(pool().size(ref(waiting))).toBe(PER_PROFILE);
    await close(busy, leaseId, false);
  });
});
