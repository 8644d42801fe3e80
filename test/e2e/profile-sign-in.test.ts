import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { witnessPage } from '../fixtures/page-witness.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';

const PASSWORD = 'pw-Kx81-secret';
const ENDED = ['succeeded', 'failed', 'cancelled'];

interface Site {
  server: Server;
  origin: string;
  /** Each request's path and whether it carried the signed-in cookie. */
  seen: Array<{ path: string; signedIn: boolean; body: string }>;
}

/**
 * A site whose sign-in page takes a password: typing it and Enter posts it, and the answer sets
 * the cookie `sid=ok`; `/home` says whether the browser is signed in.
 */
async function startSite(): Promise<Site> {
  const seen: Site['seen'] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => {
      body += chunk;
    });
    request.on('end', () => {
      const signedIn = (request.headers.cookie ?? '').includes('sid=ok');
      seen.push({ path: request.url ?? '', signedIn, body });
      response.setHeader('content-type', 'text/html');
      if (request.method === 'POST' && request.url === '/login') {
        const ok = new URLSearchParams(body).get('password') === PASSWORD;
        if (ok) response.setHeader('set-cookie', 'sid=ok; path=/; max-age=3600');
        response.end(
          `<!doctype html><title>${ok ? 'Welcome' : 'Wrong'}</title><h1>${ok ? 'Welcome' : 'Wrong'}</h1>`,
        );
        return;
      }
      if (request.url === '/home') {
        response.end(
          `<!doctype html><title>${signedIn ? 'Home' : 'Signed out'}</title><h1>${signedIn ? 'Signed in' : 'Signed out'}</h1>`,
        );
        return;
      }
      response.end(`<!doctype html><title>Sign in</title>
<form method="post" action="/login"><label>Password <input id="pw" name="password" type="password" autofocus></label></form>
<script>document.getElementById('pw').addEventListener('keydown', (event) => {
  if (event.key === 'Enter') { event.preventDefault(); event.target.form.submit(); }
});</script>`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, seen };
}

/**
 * A profile signed in by its owner through the sign-in's live page (input relayed to the page as a
 * person types), then "Done": the next run starts signed in. A sign-in left past its lease's expiry
 * never seals; a run of the profile waits behind an open sign-in.
 */
describe('signing a profile in by hand', { timeout: 180_000 }, () => {
  const prefix = uniquePrefix('profile-sign-in');
  let fleet: FleetHandle;
  let site: Site;
  let browser: Browser;
  let redis: Redis;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startSite();
    redis = new Redis(testRedisUrl());
    [fleet, browser] = await Promise.all([
      // 10 s: short enough that an abandoned sign-in expires within a test, long enough that a page
      // opened on a loaded machine (a browser context, a sign-in, two page loads) beats in time.
      startTestFleet(prefix, { PROFILE_SIGN_IN_LEASE_MS: '10000' }),
      launchTestBrowser(),
    ]);
  });
  afterAll(async () => {
    await browser?.close();
    await fleet?.close();
    await new Promise((resolve) => site?.server.close(resolve));
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  async function sessionOn(profileId: string): Promise<string> {
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Go home.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profileId,
    });
    expect(session.status).toBe(201);
    return session.body.id;
  }

  async function runHome(sessionId: string) {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'go home',
      script: { steps: [{ tool: 'browser.navigate', url: `${site.origin}/home` }], answer: 'home' },
    });
    expect(submitted.status).toBe(201);
    return submitted.body.id as string;
  }

  it('seals what the person left on "Done", and the next run starts signed in', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'shop', allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const started = await call('POST', '/v1/profiles/shop/sign-in', { url: `${site.origin}/login` });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    const { signin_id: signInId, page_url: pageUrl } = started.body;
    expect(pageUrl).toBe(`/profiles/shop/sign-ins/${signInId}`);
    const base = `/v1/profiles/shop/sign-ins/${signInId}`;

    expect((await call('POST', `${base}/heartbeat`)).status).toBe(200);

    // The person opens the sign-in page in a browser and types into the live view of the profile's
    // page (its password field has the focus), then presses Done.
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    try {
      const page = await context.newPage();
      witnessPage(context, page);
      const api = fleet.urls.api.replace(/\/v1$/, '');
      await page.goto(`${api}/runs`);
      await page.getByLabel('API key').fill(fleet.apiKey);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${api}/runs`);
      await page.goto(`${api}${pageUrl}`);
      const canvas = page.locator('#live-view canvas');
      await expect.poll(() => canvas.getAttribute('data-frames'), { timeout: 20_000 }).not.toBeNull();
      await expect
        .poll(() => page.locator('#live-view .live-state').textContent(), { timeout: 20_000 })
        .toBe('you have the page');
      await canvas.focus();
      await page.keyboard.type(PASSWORD);
      await page.keyboard.press('Enter');
      await eventually(
        async () => site.seen.some((entry) => entry.path === '/login' && entry.body.includes('password=')),
        (posted) => posted,
        20_000,
        100,
      );
      await expect
        .poll(() => page.locator('#live-view .live-url').textContent(), { timeout: 20_000 })
        .toBe(`${site.origin}/login`);
      await page.screenshot({ path: 'test-output/ui/profile-sign-in.png', fullPage: true });
      await page.getByRole('button', { name: 'Done' }).click();
      await expect.poll(() => page.locator('.sign-in-state').textContent(), { timeout: 20_000 }).toBe('done');
    } finally {
      await context.close();
    }
    expect((await call('GET', base)).body.status).toBe('done');
    const profile = await call('GET', '/v1/profiles/shop');
    expect(profile.body.sealed).toBe(true);
    expect(profile.body.last_signed_in).toMatchObject({ by: expect.any(String) });

    const runId = await runHome(await sessionOn('shop'));
    expect(await waitForStatus(runId, ENDED, 60_000)).toMatchObject({ status: 'succeeded' });
    expect(site.seen.filter((entry) => entry.path === '/home').at(-1)?.signedIn).toBe(true);

    // Nothing the person typed is kept: no Redis value holds the password.
    const values = await storedValues(redis, prefix);
    expect([...values.values()].filter((value) => value.includes(PASSWORD))).toEqual([]);
  });

  it('beats as soon as the sign-in page opens, not one beat later: a page may open late in its lease', async () => {
    expect(
      (await call('POST', '/v1/profiles', { id: 'prompt', allowed_origins: [site.origin] })).status,
    ).toBe(201);
    const started = await call('POST', '/v1/profiles/prompt/sign-in', { url: `${site.origin}/login` });
    expect(started.status).toBe(201);
    const context = await browser.newContext();
    const page = await context.newPage();
    witnessPage(context, page);
    let beats = 0;
    await page.route('**/heartbeat', (route) => {
      beats += 1;
      return route.continue();
    });
    const api = fleet.urls.api.replace(/\/v1$/, '');
    await page.goto(`${api}${started.body.page_url}`);
    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${api}${started.body.page_url}`);
    // The interval's first beat comes a third of the lease (3.3 s here) after the page opened.
    await expect.poll(() => beats, { timeout: 2_000 }).toBeGreaterThan(0);
    await context.close();
    expect((await call('POST', `/v1/profiles/prompt/sign-ins/${started.body.signin_id}/cancel`)).status).toBe(
      200,
    );
  });

  it('never seals a sign-in left past its lease, and says so on "Done"', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'late', allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const started = await call('POST', '/v1/profiles/late/sign-in', { url: `${site.origin}/login` });
    expect(started.status).toBe(201);
    const base = `/v1/profiles/late/sign-ins/${started.body.signin_id}`;
    // No heartbeat: the lease (10 s here) runs out.
    await eventually(
      async () => (await call('GET', base)).body.status,
      (status) => status === 'expired',
      30_000,
      250,
    );
    const done = await call('POST', `${base}/done`);
    expect(done.status).toBe(409);
    const profile = await call('GET', '/v1/profiles/late');
    expect(profile.body.sealed).toBe(false);
    expect(profile.body.last_signed_in).toBeNull();
  });

  it('keeps a run of the profile queued behind an open sign-in, and lets it go on "Cancel"', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'line', allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const started = await call('POST', '/v1/profiles/line/sign-in', { url: `${site.origin}/login` });
    expect(started.status).toBe(201);
    const base = `/v1/profiles/line/sign-ins/${started.body.signin_id}`;
    // The sign-in page beats while it is open (the lease lives 10 s past a beat here).
    const beating = setInterval(() => void call('POST', `${base}/heartbeat`), 1_000);
    try {
      const runId = await runHome(await sessionOn('line'));
      const seen: string[] = [];
      await eventually(
        async () => (await call('GET', `/v1/runs/${runId}`)).body,
        (run) => {
          seen.push(`${run.status}/${run.waiting_for}`);
          return run.status === 'queued' && run.waiting_for === 'profile';
        },
        30_000,
        100,
      ).catch((error: unknown) => {
        throw new Error(`${String(error)}; seen ${[...new Set(seen)].join(' ')}`);
      });
      expect((await call('POST', `${base}/heartbeat`)).status).toBe(200);
      clearInterval(beating);
      const cancelled = await call('POST', `${base}/cancel`);
      expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
      const ended = await waitForStatus(runId, ENDED, 60_000);
      expect(ended.status, JSON.stringify(ended.error)).toBe('succeeded');
      // A cancelled sign-in signed nobody in (the run's own close seals what the run left).
      expect((await call('GET', '/v1/profiles/line')).body.last_signed_in).toBeNull();
    } finally {
      clearInterval(beating);
    }
  });

  it("answers 404 to another tenant's key and to a sign-in of another profile", async () => {
    const other = await call('GET', '/v1/profiles/nope/sign-ins/signin_abcdefghijkl');
    expect(other.status).toBe(404);
    expect((await call('POST', '/v1/profiles/nope/sign-in', { url: `${site.origin}/login` })).status).toBe(
      404,
    );
  });
});
