import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { DARK_SCHEME } from '../../libs/ui/list-pages-style.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { witnessPage } from '../fixtures/page-witness.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** Where the tests leave what the browser showed, for a person to look at (gitignored). */
const SHOTS = 'test-output/ui';

/** `#rrggbb` as a computed style reads it. */
function rgb(hex: string): string {
  const [r, g, b] = [1, 3, 5].map((at) => Number.parseInt(hex.slice(at, at + 2), 16));
  return `rgb(${r}, ${g}, ${b})`;
}

/**
 * The runs list and the approvals page in real Chromium against the whole fleet: search, several
 * statuses at once, runs arriving and changing while the page is open, a phone's width, the dark
 * scheme, the keyboard; and an approval decided from the approvals page.
 */
describe('the runs list and the approvals page, in Chromium', { timeout: 150_000 }, () => {
  let fleet: FleetHandle;
  let browser: Browser;
  let site: Server;
  let origin: string;
  let base: string;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const ids: Record<'hours' | 'receipt' | 'failed', string> = { hours: '', receipt: '', failed: '' };

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true });
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(
        '<!doctype html><title>Checkout</title><h1>Checkout</h1><p>Total: 12 EUR</p><button>Pay now</button>',
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    [fleet, browser] = await Promise.all([startTestFleet(uniquePrefix('runs-list')), launchTestBrowser()]);
    base = fleet.urls.api.replace(/\/v1$/, '');
    ids.hours = await submit('Find the opening hours\nof the shop on its contact page', []);
    ids.receipt = await submit('Download the receipt', []);
    ids.failed = await submit('Open a page it may not', [
      { tool: 'browser.navigate', url: 'http://example.invalid/' },
    ]);
    for (const id of Object.values(ids)) await waitForStatus(id, ['succeeded', 'failed']);
  });

  afterAll(async () => {
    await browser?.close();
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  let profiles = 0;
  /** Submits a scripted run on a new profile allowing the site; answers its id. */
  async function submit(input: string, steps: unknown[], answer = 'Done.'): Promise<string> {
    profiles += 1;
    const profile = `list-${profiles}`;
    expect((await call('POST', '/v1/profiles', { id: profile, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Work the page.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profile,
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input,
      script: { steps, answer },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  async function signedIn(
    path = '/runs',
    viewport = { width: 1100, height: 900 },
  ): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser.newContext({ viewport });
    const page = await context.newPage();
    witnessPage(context, page);
    await page.goto(`${base}${path}`);
    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}${path}`);
    return { context, page };
  }

  const listed = (page: Page) =>
    page.locator('tr.run').evaluateAll((rows) => rows.map((row) => row.getAttribute('data-run-id')));

  it('searches by the task’s text and by a run id’s beginning, keeping only set filters in the address', async () => {
    const { context, page } = await signedIn();
    const row = page.locator(`tr.run[data-run-id="${ids.failed}"]`);
    // The row says what was asked, how it ended and why, who started it, steps and cost.
    expect(await row.locator('td.task a').textContent()).toBe('Open a page it may not');
    expect(await row.locator('td').nth(1).textContent()).toMatch(/failed\s+url_disallowed|failed\s+\S+/);
    expect(await row.locator('td.principal').textContent()).toBe('dev');
    expect(await row.locator('td').nth(5).textContent()).toMatch(/^\$\d+\.\d{4}$/);
    expect(await page.locator(`tr.run[data-run-id="${ids.hours}"] td.task a`).textContent()).toBe(
      'Find the opening hours',
    );
    await page.screenshot({ path: `${SHOTS}/runs-list-page.png`, fullPage: true });

    await page.getByLabel('Search').fill('OPENING hours');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/search=/);
    expect(new URL(page.url()).search).toBe('?search=OPENING+hours');
    expect(await listed(page)).toEqual([ids.hours]);

    await page.getByLabel('Search').fill(ids.receipt.slice(0, 10));
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(new RegExp(`search=${ids.receipt.slice(0, 10)}`));
    expect(await listed(page)).toEqual([ids.receipt]);
    await context.close();
  });

  it('filters by several statuses at once, and the next page keeps them', async () => {
    const { context, page } = await signedIn();
    await page.getByRole('checkbox', { name: 'failed' }).check();
    await page.getByRole('checkbox', { name: 'succeeded' }).check();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/status=/);
    expect(new URL(page.url()).search).toBe('?status=succeeded&status=failed');
    expect((await listed(page)).sort()).toEqual(Object.values(ids).sort());

    await page.getByRole('checkbox', { name: 'succeeded' }).uncheck();
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL((url) => url.search === '?status=failed');
    expect(await listed(page)).toEqual([ids.failed]);

    await page.goto(`${base}/runs?status=succeeded&status=failed&limit=2&search=&session_id=`);
    // The empty fields are dropped from the address.
    expect(new URL(page.url()).search).toBe('?status=succeeded&status=failed&limit=2');
    const firstPage = await listed(page);
    await page.getByRole('link', { name: 'Next page' }).click();
    await page.waitForURL(/cursor=/);
    const url = new URL(page.url());
    expect(url.searchParams.getAll('status')).toEqual(['succeeded', 'failed']);
    expect(url.searchParams.get('limit')).toBe('2');
    expect([...firstPage, ...(await listed(page))].sort()).toEqual(Object.values(ids).sort());
    await context.close();
  });

  it('shows a new run and its changes of status as they happen, without a reload', async () => {
    const { context, page } = await signedIn();
    await page.evaluate(() => {
      (window as unknown as { stayed: boolean }).stayed = true;
    });
    const runId = await submit('Arrive while the list is open', [
      { tool: 'browser.navigate', url: `${origin}/` },
    ]);
    await expect.poll(() => listed(page), { timeout: 20_000 }).toContain(runId);
    expect((await listed(page))[0]).toBe(runId);
    await expect
      .poll(() => page.locator(`tr.run[data-run-id="${runId}"] .status`).textContent(), { timeout: 30_000 })
      .toBe('succeeded');
    expect(await page.evaluate(() => (window as unknown as { stayed?: boolean }).stayed)).toBe(true);
    await context.close();
  });

  it('opens its stream again after the API answered it 503, and catches up on what it missed', async () => {
    const { context, page } = await signedIn();
    let streams = 0;
    const outage = {
      status: 503,
      json: { error: { code: 'unavailable', message: 'the store did not answer' } },
    };
    await page.route('**/v1/events', (route) => {
      streams += 1;
      return streams === 1 ? route.fulfill(outage) : route.continue();
    });
    await page.reload();
    const runId = await submit('Arrive after an outage', [{ tool: 'browser.navigate', url: `${origin}/` }]);
    await expect
      .poll(() => page.locator(`tr.run[data-run-id="${runId}"] .status`).textContent(), { timeout: 30_000 })
      .toBe('succeeded');
    expect(streams).toBeGreaterThanOrEqual(2);
    await context.close();
  });

  it('reads the list again after a re-read was refused for the key’s request rate, until it shows the end', async () => {
    const { context, page } = await signedIn();
    // Every re-read while the run works is refused 429: the list must be read again once the
    // window has passed, not stay where the last refused read left it.
    let limited = true;
    await page.route('**/runs', (route) => {
      if (route.request().resourceType() !== 'fetch' || !limited) return route.continue();
      return route.fulfill({
        status: 429,
        headers: { 'retry-after': '1' },
        json: { error: { code: 'rate_limited', message: 'this API key made over 100 requests in 2 s' } },
      });
    });
    const runId = await submit('Arrive while rate limited', [
      { tool: 'browser.navigate', url: `${origin}/` },
    ]);
    await waitForStatus(runId, ['succeeded', 'failed']);
    limited = false;
    await expect
      .poll(() => page.locator(`tr.run[data-run-id="${runId}"] .status`).textContent(), { timeout: 15_000 })
      .toBe('succeeded');
    await context.close();
  });

  it('moves through the rows with j and k and opens the marked one with Enter', async () => {
    const { context, page } = await signedIn();
    const rows = await listed(page);
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await page.keyboard.press('j');
    await page.keyboard.press('k');
    expect(await page.locator('tr.run.current').getAttribute('data-run-id')).toBe(rows[1]);
    await page.keyboard.press('Enter');
    await page.waitForURL(`${base}/runs/${rows[1]}`);
    await context.close();
  });

  it('fits a 390 px screen without sideways scrolling, and follows the system’s dark scheme', async () => {
    const { context, page } = await signedIn('/runs', { width: 390, height: 844 });
    expect(await page.evaluate(() => document.scrollingElement?.scrollWidth)).toBeLessThanOrEqual(390);
    await page.screenshot({ path: `${SHOTS}/runs-list-390.png`, fullPage: true });
    await page.goto(`${base}/approvals`);
    expect(await page.evaluate(() => document.scrollingElement?.scrollWidth)).toBeLessThanOrEqual(390);

    await page.goto(`${base}/runs`);
    const colours = () =>
      page.evaluate(() => {
        const style = getComputedStyle(document.body);
        return { background: style.backgroundColor, text: style.color };
      });
    expect(await colours()).toEqual({ background: rgb('#f6f7f9'), text: rgb('#1d2330') });
    await page.emulateMedia({ colorScheme: 'dark' });
    expect(await colours()).toEqual({ background: rgb(DARK_SCHEME.background), text: rgb(DARK_SCHEME.text) });
    await page.screenshot({ path: `${SHOTS}/runs-list-dark.png`, fullPage: true });
    await context.close();
  });

  it('lists the approvals waiting for the key, newest first, and decides one in place', async () => {
    const act = (name: string) => [
      { tool: 'browser.navigate', url: `${origin}/checkout` },
      { tool: 'browser.act', target: { role: 'button', name }, action: 'click' },
    ];
    const older = await submit('Pay the first invoice', act('Pay now'), 'Paid.');
    await waitForStatus(older, ['parked']);
    const newer = await submit('Pay the second invoice', act('Pay now'), 'Paid.');
    await waitForStatus(newer, ['parked']);
    const { context, page } = await signedIn('/approvals');
    const runsShown = () =>
      page
        .locator('li.pending')
        .evaluateAll((items) => items.map((item) => item.getAttribute('data-run-id')));
    expect(await runsShown()).toEqual([newer, older]);
    const card = page.locator(`li.pending[data-run-id="${newer}"] article.approval`);
    expect(await card.locator('h3').textContent()).toContain('button “Pay now”');
    await expect
      .poll(
        () =>
          card
            .locator('img.approval-shot')
            .evaluate((image: HTMLImageElement) => image.complete && image.naturalWidth)
            .catch(() => 0),
        { timeout: 30_000 },
      )
      .toBeGreaterThan(0);
    await page.screenshot({ path: `${SHOTS}/approvals-page.png`, fullPage: true });
    await page.setViewportSize({ width: 390, height: 844 });
    expect(await page.evaluate(() => document.scrollingElement?.scrollWidth)).toBeLessThanOrEqual(390);
    await page.setViewportSize({ width: 1100, height: 900 });

    await card.getByRole('button', { name: 'Approve' }).click();
    // Decided in place: the list is read anew without the decided card.
    await expect.poll(runsShown, { timeout: 20_000 }).toEqual([older]);
    expect((await waitForStatus(newer, ['succeeded', 'failed'], 45_000)).status).toBe('succeeded');
    await context.close();
  });
});
