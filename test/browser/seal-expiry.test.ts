import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PageFactory, PageSession } from '../../libs/lease/index.js';
import { PlaywrightPageFactory } from '../../libs/lease/playwright-pages.js';
import {
  idemKey,
  startTestBrowserWorker,
  type TestBrowserWorker,
  TestClock,
} from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE = 60_000;

/**
 * Pages whose storage read takes as long as the test says, measured on the worker's clock: a seal
 * that waits for the page's cookie writes may outlast the lease (ADR-0127 d8).
 */
class SlowSealPages implements PageFactory {
  readonly #inner: PlaywrightPageFactory;
  storageReadMs = 0;

  constructor(
    browser: () => Browser,
    private readonly clock: TestClock,
  ) {
    this.#inner = new PlaywrightPageFactory(browser);
  }

  openContexts(): number {
    return this.#inner.openContexts();
  }

  async open(input: Parameters<PageFactory['open']>[0]): Promise<PageSession> {
    const session = await this.#inner.open(input);
    const pages = this;
    return {
      navigate: (...args) => session.navigate(...args),
      observe: (...args) => session.observe(...args),
      act: (...args) => session.act(...args),
      dispose: () => session.dispose(),
      async storageState() {
        const state = await session.storageState();
        pages.clock.advance(pages.storageReadMs);
        return state;
      },
    };
  }
}

describe('a seal checks the lease expiry again when it is written (ADR-0127 d8)', () => {
  const prefix = uniquePrefix('seal-expiry');
  const clock = new TestClock();
  let pages: SlowSealPages | undefined;
  let worker: TestBrowserWorker;
  let site: PageServer;
  let redis: Redis;

  beforeAll(async () => {
    site = await PageServer.start();
    worker = await startTestBrowserWorker({
      prefix,
      clock,
      pages: (browser) => {
        pages = new SlowSealPages(browser, clock);
        return pages;
      },
    });
    redis = new Redis(testRedisUrl());
  });

  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  async function closeAfterStorageRead(profileId: string, storageReadMs: number) {
    const created = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: profileId, tenant: 't1', principal: 'owner', allowed_origins: [site.origin] },
    });
    expect(created.status).toBe(201);
    const lease = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: idemKey(),
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_seal',
        attempt: 1,
        requested_expires_at_ms: clock.now() + 10 * MINUTE,
      },
    });
    expect(lease.status).toBe(201);
    const base = `/v1/tenants/t1/profiles/${profileId}/leases/${lease.body.lease_id}`;
    const navigated = await worker.call('POST', `${base}/navigate`, {
      body: { sequence: 1, url: site.url('/pages/second.html'), deadline_ms: 15_000 },
    });
    expect(navigated.status).toBe(200);
    if (!pages) throw new Error('the worker did not build its page factory');
    pages.storageReadMs = storageReadMs;
    const remainingMs = lease.body.expires_at_ms - clock.now();
    const closed = await worker.call('POST', `${base}/close`, {
      idempotencyKey: idemKey(),
      body: { seal: true },
    });
    pages.storageReadMs = 0;
    return { closed, remainingMs };
  }

  it('drops a seal whose storage read outlasted the lease, and stores nothing in the profile', async () => {
    const { closed, remainingMs } = await closeAfterStorageRead('late', 10 * MINUTE + 1);
    expect(remainingMs).toBeLessThanOrEqual(10 * MINUTE);
    expect(closed.status).toBe(200);
    expect(closed.body).toMatchObject({ state: 'closed', sealed: false });
    expect(await redis.hget(`${prefix}:{prf:t1/late}:profile`, 'sealed')).toBeNull();
  });

  it('keeps a seal whose storage read ended before the lease did', async () => {
    const { closed } = await closeAfterStorageRead('in-time', 1_000);
    expect(closed.body).toMatchObject({ state: 'closed', sealed: true });
    expect(await redis.hget(`${prefix}:{prf:t1/in-time}:profile`, 'sealed')).not.toBeNull();
  });
});
