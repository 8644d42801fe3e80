import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrowserToolError, CaptureTimedOutError } from '../../libs/browser/index.js';
import { DataPlaneError } from '../../libs/lease/index.js';
import { toldRefusal } from '../../libs/lease/told-refusal.js';
import { errorFromAnswer } from '../../libs/provider/index.js';
import {
  leaseOwnProfile,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0159: a capture cut off by its call's deadline fails `page_changed` (earlier references are
 * void), and the answer says the capture timed out — through the data plane (real Chromium, real
 * Redis) and as the run side reads that answer — so no one goes looking for a page that changed.
 */
describe('a capture cut off by the deadline, as the data plane answers it', () => {
  let worker: TestBrowserWorker;
  let site: PageServer;

  beforeAll(async () => {
    site = await PageServer.start();
    worker = await startTestBrowserWorker({ prefix: uniquePrefix('capture-timeout') });
  });

  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
  });

  it('answers page_changed marked capture_timed_out, and the provider says the capture timed out', async () => {
    const { path } = await leaseOwnProfile(worker, 'capture', 'run_capture', site.origin);
    const navigated = await worker.call('POST', `${path}/navigate`, {
      body: { sequence: 1, url: site.url('/pages/controls.html'), deadline_ms: 15_000 },
    });
    expect(navigated.status).toBe(200);
    // The navigate's screenshot is taken after its answer, before the lease's next call: let it be.
    await worker.handle.leases.screenshotsDrained();
    // The lease's page (the one context this worker has open) is kept busy for 10 s: a capture cannot
    // complete within the observe's 500 ms.
    const [page] = worker.handle.browser.contexts().flatMap((context) => context.pages());
    if (!page) throw new Error('the lease has no page');
    await page.evaluate('setTimeout(() => { const end = Date.now() + 10000; while (Date.now() < end); }, 0)');

    const observed = await worker.call('POST', `${path}/observe`, { body: { deadline_ms: 500 } });
    expect(observed.status).toBe(409);
    expect(observed.body.error).toMatchObject({ code: 'page_changed', capture_timed_out: true });
    expect(observed.body.error.message).toMatch(/capture timed out/);

    const read = errorFromAnswer('observe', observed.status, observed.body);
    expect(read).toMatchObject({ code: 'page_changed', retryable: false });
    expect(read.message).toMatch(/^observe answered 409 page_changed: the page's capture timed out/);

    // A page_changed of a stale revision is not marked: it is the page that moved on.
    const stale = await worker.call('POST', `${path}/act`, {
      body: {
        sequence: 2,
        args: { revision: navigated.body.observation.revision, element: 'e1', action: 'click' },
      },
    });
    expect(stale.status).toBe(409);
    expect(stale.body.error.code).toBe('page_changed');
    expect(stale.body.error.capture_timed_out).toBeUndefined();
  });

  it('marks an effect whose settled page could not be captured in time, after its dispatch as before it', () => {
    const cutOff = new CaptureTimedOutError('the capture timed out');
    const dispatched = toldRefusal(cutOff, true, 1);
    expect(dispatched).toBeInstanceOf(DataPlaneError);
    expect(dispatched).toMatchObject({
      code: 'page_changed',
      details: { dispatched: true, sequence: 1, capture_timed_out: true },
    });
    expect(toldRefusal(cutOff, false, 0)).toMatchObject({
      details: { dispatched: false, capture_timed_out: true },
    });
    // Any other page_changed carries no such mark.
    expect(toldRefusal(new BrowserToolError('page_changed', 'stale'), true, 1)).toMatchObject({
      details: { dispatched: true, sequence: 1 },
    });
    expect(
      (toldRefusal(new BrowserToolError('page_changed', 'stale'), true, 1) as DataPlaneError).details,
    ).not.toHaveProperty('capture_timed_out');
  });
});
