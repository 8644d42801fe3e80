import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { witnessPage } from '../fixtures/page-witness.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** Where the tests leave what the browser showed, for a person to look at (gitignored). */
const SHOTS = 'test-output/ui';

/**
 * The run pages in real Chromium against the whole fleet: a person signs in with a key,
 * lists runs, decides an approval from its card and watches a run work a page. The site is a real
 * server: buttons that post a click, and pages slow enough that a run is seen while it works.
 */
describe('the run pages, in Chromium', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let browser: Browser;
  let site: Server;
  let origin: string;
  let base: string;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      if (request.method === 'POST') return void response.end('ok');
      if (path.startsWith('/api/price')) {
        response.statusCode = 500;
        return void response.end('down');
      }
      response.setHeader('content-type', 'text/html');
      if (path.startsWith('/noisy')) {
        // A checkout whose script logs an error and whose price request fails (its query a token).
        return void response.end(
          `<!doctype html><title>Checkout</title><h1>Checkout</h1><p>Total: 12 EUR</p>
<script>console.error('cart total is NaN'); fetch('/api/price?session=tok-s3cr3t');</script>
<button onclick="fetch('pay', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Paid</h2>'))">Pay now</button>`,
        );
      }
      const slow = /\/slow\/(\d+)/.exec(path);
      if (slow) {
        // A page a second in coming, each its own colour: the live view has frames to tell apart.
        const hue = Number(slow[1]) * 90;
        return void setTimeout(
          () =>
            response.end(
              `<!doctype html><title>Slow ${slow[1]}</title><body style="background:hsl(${hue},70%,60%)"><h1>Slow page ${slow[1]}</h1></body>`,
            ),
          1_000,
        );
      }
      response.end(
        `<!doctype html><title>Checkout</title><h1>Checkout</h1><p>Total: 12 EUR</p>
<button onclick="fetch('pay', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Paid</h2>'))">Pay now</button>`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    [fleet, browser] = await Promise.all([startTestFleet(uniquePrefix('run-pages')), launchTestBrowser()]);
    base = fleet.urls.api.replace(/\/v1$/, '');
  });

  afterAll(async () => {
    await browser?.close();
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  let profiles = 0;
  /** Submits a scripted run on a new profile allowing the site; answers its id. */
  async function submit(steps: unknown[], answer = 'Done.', key = fleet.apiKey): Promise<string> {
    profiles += 1;
    const profile = `pages-${profiles}`;
    expect(
      (await call('POST', '/v1/profiles', { id: profile, allowed_origins: [origin] }, { key })).status,
    ).toBe(201);
    const agent = await call(
      'POST',
      '/v1/agents',
      {
        model: 'scripted',
        instructions: 'Work the page.',
        tools: ['browser.navigate', 'browser.observe', 'browser.act'],
      },
      { key },
    );
    const session = await call(
      'POST',
      '/v1/sessions',
      { agent_id: agent.body.id, browser_profile_id: profile },
      { key },
    );
    const run = await call(
      'POST',
      `/v1/sessions/${session.body.id}/runs`,
      { input: 'Work the page', script: { steps, answer } },
      { key },
    );
    expect(run.status).toBe(201);
    return run.body.id;
  }

  /** A fresh browser context signed in with `key` through the form; starts at `path`. */
  async function signedIn(key: string, path = '/runs'): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    witnessPage(context, page);
    await page.goto(`${base}${path}`);
    expect(new URL(page.url()).pathname).toBe('/signin');
    await page.getByLabel('API key').fill(key);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}${path}`);
    return { context, page };
  }

  it('signs a person in with a key into an HttpOnly, SameSite=Strict cookie, and refuses a wrong key', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(`${base}/runs`);
    await page.getByLabel('API key').fill('lhk_not-a-key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toContain('not accepted');
    await page.screenshot({ path: `${SHOTS}/signin-refused.png` });
    expect(await context.cookies()).toEqual([]);

    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/runs`);
    const [cookie] = await context.cookies();
    expect(cookie).toMatchObject({ name: 'lh_session', httpOnly: true, sameSite: 'Strict', path: '/' });
    expect(cookie?.value).not.toContain(fleet.apiKey);
    const response = await page.goto(`${base}/runs`);
    expect(response?.headers()['content-security-policy']).toBe(
      "default-src 'self'; img-src 'self'; script-src 'self'; frame-ancestors 'none'",
    );
    await context.close();
  });

  it('marks the cookie Secure behind a TLS proxy, and signs out only with the page’s CSRF token', async () => {
    const signIn = await fetch(`${base}/signin`, {
      method: 'POST',
      redirect: 'manual',
      // The API's own origin, as a browser sends it with the form (a sign-in without it is refused).
      headers: {
        'content-type': 'application/x-www-form-urlencoded',
        'x-forwarded-proto': 'https',
        origin: new URL(base).origin,
      },
      body: new URLSearchParams({ key: fleet.apiKey, next: '//evil.example/' }).toString(),
    });
    expect(signIn.status).toBe(303);
    expect(signIn.headers.get('location')).toBe('/runs');
    const setCookie = signIn.headers.get('set-cookie') ?? '';
    expect(setCookie).toMatch(/^lh_session=[A-Za-z0-9_-]{43};/);
    // Its attributes, in whatever order they are written.
    expect(
      new Set(
        setCookie
          .split(';')
          .slice(1)
          .map((part) => part.trim()),
      ),
    ).toEqual(new Set(['HttpOnly', 'SameSite=Strict', 'Path=/', 'Max-Age=43200', 'Secure']));
    const cookie = setCookie.split(';')[0] ?? '';
    const runsPage = await fetch(`${base}/runs`, { headers: { cookie }, redirect: 'manual' });
    expect(runsPage.status).toBe(200);
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(await runsPage.text())?.[1] ?? '';

    const signOut = (token?: string) =>
      fetch(`${base}/signout`, {
        method: 'POST',
        redirect: 'manual',
        headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams(token ? { csrf_token: token } : {}).toString(),
      });
    expect((await signOut()).status).toBe(401);
    expect((await fetch(`${base}/v1/runs`, { headers: { cookie } })).status).toBe(200);
    expect((await signOut(csrf)).status).toBe(303);
    expect((await fetch(`${base}/v1/runs`, { headers: { cookie } })).status).toBe(401);
    expect(
      (await fetch(`${base}/runs`, { headers: { cookie }, redirect: 'manual' })).headers.get('location'),
    ).toBe('/signin?next=%2Fruns');
  });

  it('refuses a signed-in change without its CSRF token, hides another tenant’s run, and ends with a revoked key', async () => {
    const runId = await submit([{ tool: 'browser.navigate', url: `${origin}/checkout` }]);
    await waitForStatus(runId, ['succeeded', 'failed']);
    const { key: otherKey, identity } = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'olga',
      scopes: ['runs:read', 'runs:write', 'approvals:write', 'admin'],
    });
    const { context, page } = await signedIn(fleet.apiKey);
    const answers = await page.evaluate(async (id) => {
      const token = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
      const bare = await fetch(`/v1/runs/${id}/retry`, { method: 'POST' });
      const wrong = await fetch(`/v1/runs/${id}/retry`, {
        method: 'POST',
        headers: { 'x-csrf-token': 'nope' },
      });
      const right = await fetch(`/v1/runs/${id}/retry`, {
        method: 'POST',
        headers: { 'x-csrf-token': token },
      });
      return {
        bare: bare.status,
        wrong: wrong.status,
        right: right.status,
        code: (await bare.json()).error.code,
      };
    }, runId);
    // The run succeeded, so the retry the token lets through is answered 409 by the route, not the door.
    expect(answers).toEqual({ bare: 401, wrong: 401, right: 409, code: 'unauthorized' });
    await context.close();

    const other = await signedIn(otherKey);
    const visit = await other.page.goto(`${base}/runs/${runId}`);
    expect(visit?.status()).toBe(404);
    expect(await other.page.evaluate(async (id) => (await fetch(`/v1/runs/${id}`)).status, runId)).toBe(404);
    await other.page.screenshot({ path: `${SHOTS}/other-tenant-404.png` });
    expect(await fleet.store.revokeApiKey('other', identity.key_id)).toBe(true);
    await other.page.goto(`${base}/runs`);
    expect(new URL(other.page.url()).pathname).toBe('/signin');
    await other.context.close();
  });

  it('lists the tenant’s runs newest first on the runs page, and filters them by status', async () => {
    const first = await submit([{ tool: 'browser.navigate', url: `${origin}/checkout` }]);
    const second = await submit([
      { tool: 'browser.navigate', url: `${origin}/nowhere-allowed` },
      { tool: 'browser.navigate', url: 'http://example.invalid/' },
    ]);
    await waitForStatus(first, ['succeeded', 'failed']);
    await waitForStatus(second, ['succeeded', 'failed']);
    const { context, page } = await signedIn(fleet.apiKey);
    const listed = await page
      .locator('tr.run')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    expect(listed.indexOf(second)).toBeGreaterThanOrEqual(0);
    expect(listed.indexOf(second)).toBeLessThan(listed.indexOf(first));
    await page.screenshot({ path: `${SHOTS}/runs-list.png`, fullPage: true });

    await page.getByRole('checkbox', { name: 'failed' }).check();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=failed/);
    const failed = await page
      .locator('tr.run')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    expect(failed).toContain(second);
    expect(failed).not.toContain(first);
    await page.screenshot({ path: `${SHOTS}/runs-list-failed.png`, fullPage: true });

    // A page of one, then the next page by its link, which keeps the page's other settings.
    await page.goto(`${base}/runs?limit=1`);
    const firstPage = await page
      .locator('tr.run')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.waitForURL(/cursor=/);
    const secondPage = await page
      .locator('tr.run')
      .evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));
    expect([...firstPage, ...secondPage]).toEqual([second, first]);
    expect(new URL(page.url()).searchParams.get('limit')).toBe('1');
    await context.close();
  });

  it('shows a parked run’s approval card with its outlined screenshot, and Approve resumes it to success with every step', async () => {
    const runId = await submit(
      [
        { tool: 'browser.navigate', url: `${origin}/checkout` },
        { tool: 'browser.observe' },
        {
          tool: 'browser.act',
          target: { role: 'button', name: 'Pay now' },
          action: 'click',
          postcondition: { role: 'heading', name: 'Paid', wait_ms: 2_000 },
        },
      ],
      'Paid.',
    );
    expect((await waitForStatus(runId, ['parked', 'succeeded', 'failed'])).status).toBe('parked');
    const { context, page } = await signedIn(fleet.apiKey, `/runs/${runId}`);
    const card = page.locator('article.approval');
    await expect.poll(() => card.count()).toBe(1);
    expect(await card.locator('h3').textContent()).toContain('button “Pay now”');
    expect(await card.locator('.page-url').textContent()).toBe(`${origin}/checkout`);
    const shot = card.locator('img.approval-shot');
    await expect
      .poll(() => shot.evaluate((image: HTMLImageElement) => image.complete && image.naturalWidth))
      .toBeGreaterThan(0);
    await page.screenshot({ path: `${SHOTS}/approval-card.png`, fullPage: true });

    await card.getByRole('button', { name: 'Approve' }).click();
    // No reload by the test: the page follows the run's events and shows its end itself.
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 45_000 }).toBe('succeeded');
    expect(await page.locator('article.approval').count()).toBe(0);
    expect(await page.locator('dd.answer').textContent()).toBe('Paid.');
    const tools = await page.locator('li.step-tool b').allTextContents();
    expect(tools).toEqual(['browser.navigate', 'browser.observe', 'browser.act']);
    expect(await page.locator('li.step-model').count()).toBeGreaterThanOrEqual(3);
    const thumbs = page.locator('li.step-tool img.thumb');
    // DESIGN §12: a screenshot taken after its act answered shows "pending" until the page,
    // fetching itself again, finds it stored.
    await expect.poll(() => thumbs.count(), { timeout: 30_000 }).toBe(2);
    for (const thumb of await thumbs.all())
      await expect
        .poll(() => thumb.evaluate((image: HTMLImageElement) => image.complete && image.naturalWidth))
        .toBeGreaterThan(0);
    await page.screenshot({ path: `${SHOTS}/run-succeeded.png`, fullPage: true });
    await context.close();
  });

  it('shows attempts as sections, decisions kept after deciding, an act’s element and the page’s console errors; Retry and Cancel work from the page', async () => {
    const runId = await submit(
      [
        { tool: 'browser.navigate', url: `${origin}/noisy` },
        { tool: 'browser.observe' },
        {
          tool: 'browser.act',
          target: { role: 'button', name: 'Pay now' },
          action: 'click',
          postcondition: { role: 'heading', name: 'Paid', wait_ms: 2_000 },
        },
        { tool: 'browser.navigate', url: 'http://example.invalid/' },
      ],
      'Paid.',
    );
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 5 },
    });
    expect(approved.status).toBe(200);
    expect((await waitForStatus(runId, ['failed', 'succeeded'])).status).toBe('failed');

    const { context, page } = await signedIn(fleet.apiKey, `/runs/${runId}`);
    expect(await page.locator('section.attempt').count()).toBe(1);
    const first = page.locator('section.attempt[data-attempt="1"]');
    expect(await first.locator('.attempt-error').textContent()).toContain('url_disallowed');

    const decision = page.locator('#decisions li.decision');
    expect(await decision.count()).toBe(1);
    expect(await decision.getAttribute('class')).toContain('decision-approved');
    expect(await decision.locator('.asked').textContent()).toContain('click on button “Pay now”');
    expect(await decision.locator('.decided-by').textContent()).toBe(approved.body.decided_by);
    expect(await decision.locator('.grant').textContent()).toContain('5 more actions');

    const act = first.locator('li.step-tool', { has: page.locator('b', { hasText: 'browser.act' }) });
    expect(await act.locator('.act-target').textContent()).toBe('click on button “Pay now”');
    expect(await act.locator('.postcondition').textContent()).toMatch(/^Postcondition met after/);

    const navigate = first.locator('li.step-tool').first();
    expect(await navigate.locator('code.console-error').allTextContents()).toContain('cart total is NaN');
    const failedRequests = await navigate.locator('li.failed-request').allTextContents();
    expect(failedRequests.join('\n')).toContain(`500 GET ${origin}/api/price`);
    expect(await page.content()).not.toContain('tok-s3cr3t');

    // The scrubber plays the steps' screenshots in order.
    const scrubber = page.locator('#scrubber');
    await expect.poll(() => scrubber.locator('.scrub-frames li').count(), { timeout: 30_000 }).toBe(2);
    await page.reload();
    const frames = await scrubber
      .locator('.scrub-frames li')
      .evaluateAll((items) => items.map((item) => item.getAttribute('data-src')));
    await scrubber.locator('.scrub-play').click();
    await expect.poll(() => scrubber.locator('.scrub-frame').getAttribute('src')).toBe(frames[1]);
    await page.screenshot({ path: `${SHOTS}/run-page.png`, fullPage: true });

    // Retry starts attempt 2 of the same run; it parks again at the act, and Cancel ends it.
    await page.getByRole('button', { name: 'Retry' }).click();
    await expect
      .poll(() => page.locator('section.attempt[data-attempt="2"]').count(), { timeout: 45_000 })
      .toBe(1);
    expect(await page.locator('section.attempt[data-attempt="1"] li.step').count()).toBeGreaterThan(0);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 30_000 }).toBe('cancelled');
    expect(await page.getByRole('button', { name: 'Cancel' }).count()).toBe(0);
    expect((await call('GET', `/v1/runs/${runId}`)).body).toMatchObject({ status: 'cancelled', attempt: 2 });
    await context.close();
  });

  it('updates the live view while a run works a page, without a reload', async () => {
    const { context, page } = await signedIn(fleet.apiKey);
    const runId = await submit(
      [1, 2, 3, 4].map((n) => ({ tool: 'browser.navigate', url: `${origin}/slow/${n}` })),
    );
    await page.goto(`${base}/runs/${runId}`);
    // The marker goes on the run's page itself. On the loaded suite the store may miss its bound
    // once as the run starts; the first load is then the outage page, which loads itself again
    // (that reload is the outage page's, not the live view's).
    await page.locator('#run').waitFor({ timeout: 15_000 });
    await page.evaluate(() => {
      (window as unknown as { stayed: boolean }).stayed = true;
    });
    const frames = new Set<string>();
    let shotTaken = false;
    const until = Date.now() + 45_000;
    while (Date.now() < until) {
      const frame = await page
        .locator('#live-frame')
        .getAttribute('data-frame', { timeout: 1_000 })
        .catch(() => null);
      if (frame && !frames.has(frame)) {
        frames.add(frame);
        if (frames.size === 2 && !shotTaken) {
          shotTaken = true;
          await page.screenshot({ path: `${SHOTS}/live-view.png`, fullPage: true });
        }
      }
      if ((await page.locator('#run-status').textContent()) === 'succeeded') break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(frames.size).toBeGreaterThanOrEqual(2);
    expect(await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed)).toBe(true);
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 30_000 }).toBe('succeeded');
    await context.close();
  });

  it('reads the page again after a re-read was refused for the key’s request rate, until it shows the end', async () => {
    const { context, page } = await signedIn(fleet.apiKey);
    const runId = await submit([1, 2].map((n) => ({ tool: 'browser.navigate', url: `${origin}/slow/${n}` })));
    // Every re-read while the run works is refused 429: the page must read again once the window
    // has passed, not stay where the last refused read left it.
    let limited = true;
    await page.route(`**/runs/${runId}`, (route) => {
      if (route.request().resourceType() !== 'fetch' || !limited) return route.continue();
      return route.fulfill({
        status: 429,
        headers: { 'retry-after': '1' },
        json: { error: { code: 'rate_limited', message: 'this API key made over 100 requests in 2 s' } },
      });
    });
    await page.goto(`${base}/runs/${runId}`);
    await waitForStatus(runId, ['succeeded', 'failed']);
    limited = false;
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 15_000 }).toBe('succeeded');
    await context.close();
  });

  it('keeps following the run after the API answered its event stream and a re-read 503 once', async () => {
    const { context, page } = await signedIn(fleet.apiKey);
    const runId = await submit([1, 2].map((n) => ({ tool: 'browser.navigate', url: `${origin}/slow/${n}` })));
    // The first stream and the first re-read of the page meet a store that did not answer, as
    // during a Redis outage: the page tries again rather than stopping where it was.
    const outage = {
      status: 503,
      json: { error: { code: 'unavailable', message: 'the store did not answer' } },
    };
    let streams = 0;
    let reads = 0;
    await page.route(`**/v1/runs/${runId}/events`, (route) => {
      streams += 1;
      return streams === 1 ? route.fulfill(outage) : route.continue();
    });
    await page.route(`**/runs/${runId}`, (route) => {
      if (route.request().resourceType() !== 'fetch') return route.continue();
      reads += 1;
      return reads === 1 ? route.fulfill(outage) : route.continue();
    });
    await page.goto(`${base}/runs/${runId}`);
    await expect.poll(() => page.locator('#run-status').textContent(), { timeout: 45_000 }).toBe('succeeded');
    expect(streams).toBeGreaterThanOrEqual(2);
    await context.close();
  });
});
