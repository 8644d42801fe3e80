import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** Chromium's own process id, as DevTools names it. */
async function chromiumPid(worker: TestBrowserWorker): Promise<number> {
  const session = await worker.handle.browser.newBrowserCDPSession();
  try {
    const { processInfo } = (await session.send('SystemInfo.getProcessInfo')) as {
      processInfo: { type: string; id: number }[];
    };
    const browserProcess = processInfo.find((entry) => entry.type === 'browser');
    if (!browserProcess) throw new Error('DevTools named no browser process');
    return browserProcess.id;
  } finally {
    await session.detach().catch(() => undefined);
  }
}

describe('a browser worker whose Chromium exits', () => {
  const prefix = uniquePrefix('chromium-restart');
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

  it('revokes the leases whose pages died with it and serves new leases from a new Chromium', async () => {
    const page = site.addPage('restart.html', '<!doctype html><title>Restart</title><p>here</p>');
    const before = await leaseOwnProfile(worker, 'restart', 'run_before', site.origin);
    expect(
      (await worker.call('POST', `${before.path}/navigate`, { body: { sequence: 1, url: page } })).status,
    ).toBe(200);
    const killed = worker.handle.browser;
    process.kill(await chromiumPid(worker), 'SIGKILL');

    // The lease's page went with Chromium: the lease is revoked, not left live with no page.
    await expect
      .poll(async () => (await worker.call('GET', before.path)).body.state, { timeout: 20_000 })
      .toBe('closed');
    await worker.handle.chromium.settled();
    expect(worker.handle.browser).not.toBe(killed);
    expect(worker.handle.browser.isConnected()).toBe(true);
    const ready = await worker.call('GET', '/readyz', { token: null });
    expect(ready.status).toBe(200);

    const after = await leaseOwnProfile(worker, 'restart', 'run_after', site.origin);
    const navigated = await worker.call('POST', `${after.path}/navigate`, {
      body: { sequence: 1, url: page },
    });
    expect(navigated.status).toBe(200);
    expect(navigated.body.observation.title).toBe('Restart');
  });
});
