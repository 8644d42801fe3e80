import { mkdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { DataPlaneClient, type LeaseRef } from '../../libs/provider/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { EventStreamReader, type StreamEvent } from '../fixtures/event-stream.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * A run's page, live, through the API (the whole fleet in this process): the stream relayed from
 * the browser worker behind a key, the holder's input relayed to the page, another tenant's key
 * refused, and the stream closed when its key is revoked.
 */
describe("a run's live page through the API", { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  let redis: Redis;
  let browser: Browser;
  /** Every path the site was asked for: the page reports what is typed into its field. */
  const typed: string[] = [];
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((request, response) => {
      typed.push(request.url ?? '/');
      response.setHeader('content-type', 'text/html');
      if (request.url === '/dialog') {
        // Its button asks a prompt; the answer is reported to the site.
        response.end(
          `<!doctype html><title>Name</title>
           <button style="position:fixed;left:0;top:0;width:300px;height:40px"
             onclick="fetch('/answered?v=' + encodeURIComponent(prompt('Your name, please?', 'nobody')))">Continue</button>`,
        );
        return;
      }
      response.end(
        `<!doctype html><title>Sign in</title>
         <input aria-label="User" style="position:fixed;left:0;top:0;width:300px;height:40px"
           oninput="document.getElementById('echo').textContent = 'typed ' + this.value; fetch('/typed?v=' + encodeURIComponent(this.value))">
         <p id="echo" style="position:fixed;top:60px">nothing typed</p>
         <button style="position:fixed;top:120px">Continue</button>`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    [fleet, browser] = await Promise.all([startTestFleet(uniquePrefix('live-view')), launchTestBrowser()]);
    redis = new Redis(testRedisUrl());
  });

  afterAll(async () => {
    redis?.disconnect();
    await browser?.close();
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  let profiles = 0;
  /** A scripted run parked on its act's approval: its lease stays live, on the site's page. */
  async function parkedRun(path = '/signin'): Promise<{ runId: string; profileId: string }> {
    profiles += 1;
    const profileId = `live-${profiles}`;
    expect((await call('POST', '/v1/profiles', { id: profileId, allowed_origins: [origin] })).status).toBe(
      201,
    );
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Sign in.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profileId,
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Sign in',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}${path}` },
          { tool: 'browser.act', target: { role: 'button', name: 'Continue' }, action: 'click' },
        ],
        answer: 'Done.',
      },
    });
    const runId = run.body.id as string;
    expect((await waitForStatus(runId, ['parked', 'succeeded', 'failed'])).status).toBe('parked');
    return { runId, profileId };
  }

  const watch = (runId: string, key = fleet.apiKey) =>
    EventStreamReader.open(`${fleet.urls.api}/runs/${runId}/live`, { authorization: `Bearer ${key}` });
  const isFrame = (event: StreamEvent) => event.event === 'frame';

  /** The run's lease on the data plane, as the takeover will hold it. */
  async function runLease(profileId: string): Promise<{ client: DataPlaneClient; lease: LeaseRef }> {
    const client = new DataPlaneClient({
      baseUrl: fleet.urls.browserWorker,
      token: fleet.config.secrets.dataPlaneToken as string,
    });
    const profile = { tenant: 'dev', id: profileId };
    const leaseId = (await new RedisLeaseStore(redis, fleet.config.redis.keyPrefix).liveLeaseId(
      profile,
    )) as string;
    return { client, lease: { profile, leaseId } };
  }

  it("relays the run's page to its principal as server-sent events", async () => {
    const { runId } = await parkedRun();
    const stream = await watch(runId);
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');
    expect((await stream.next((event) => event.event === 'state')).data).toEqual({ person: null });
    const frame = await stream.next(isFrame);
    expect(frame.data.url).toBe(`${origin}/signin`);
    expect(Buffer.from(frame.data.jpeg, 'base64').subarray(0, 2)).toEqual(Buffer.from([0xff, 0xd8]));
    stream.close();
  });

  it('relays input only from the person holding the page, and the page sees it', async () => {
    const { runId, profileId } = await parkedRun();
    const typing = {
      events: [
        { type: 'mouse', action: 'down', x: 20, y: 20 },
        { type: 'mouse', action: 'up', x: 20, y: 20 },
        { type: 'text', text: 'ada' },
      ],
    };
    const early = await call('POST', `/v1/runs/${runId}/input`, typing);
    expect(early.status).toBe(409);

    const { client, lease } = await runLease(profileId);
    await client.startPersonControl(lease, { holder: 'principal:dev', seconds: 60 });
    const sent = await call('POST', `/v1/runs/${runId}/input`, typing);
    expect(sent.status).toBe(200);
    expect(typeof sent.body.sequence).toBe('number');
    await client.endPersonControl(lease, { holder: 'principal:dev' });
    const seen = await client.observe(lease.profile, lease.leaseId, {});
    expect(JSON.stringify(seen.observation)).toContain('typed ada');
  });

  it("answers 404 to another tenant's key, and a key that may not watch", async () => {
    const { runId } = await parkedRun();
    const other = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'mallory',
      scopes: ['runs:read', 'runs:write'],
    });
    expect((await watch(runId, other.key)).status).toBe(404);
    expect(
      (
        await call(
          'POST',
          `/v1/runs/${runId}/input`,
          { events: [{ type: 'text', text: 'x' }] },
          { key: other.key },
        )
      ).status,
    ).toBe(404);
    const colleague = await fleet.store.createApiKey({
      tenant: 'dev',
      principal: 'colleague',
      scopes: ['runs:read'],
    });
    expect((await watch(runId, colleague.key)).status).toBe(404);
  });

  it('closes the stream when its key is revoked', async () => {
    const { runId } = await parkedRun();
    const made = await call('POST', '/v1/api-keys', { principal: 'dev', scopes: ['runs:read'] });
    expect(made.status).toBe(201);
    const stream = await watch(runId, made.body.key);
    await stream.next((event) => event.event === 'state');
    expect((await call('DELETE', `/v1/api-keys/${made.body.key_id}`)).status).toBeLessThan(300);
    await stream.untilEnded(20_000);
    expect(stream.ended).toBe(true);
  });

  it("shows the page live on the run page in Chromium, and sends the holder's typing to it", async () => {
    const { runId, profileId } = await parkedRun();
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const base = fleet.urls.api.replace(/\/v1$/, '');
    await page.goto(`${base}/runs`);
    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/runs`);
    await page.goto(`${base}/runs/${runId}`);

    const canvas = page.locator('#live-view canvas');
    await expect.poll(() => canvas.getAttribute('data-frames'), { timeout: 20_000 }).not.toBeNull();
    await expect
      .poll(() => page.locator('#live-view .live-url').textContent(), { timeout: 20_000 })
      .toBe(`${origin}/signin`);
    await expect
      .poll(() => page.locator('#live-view .live-state').textContent(), { timeout: 20_000 })
      .toBe('waiting for you');

    const { client, lease } = await runLease(profileId);
    await client.startPersonControl(lease, { holder: 'principal:dev', seconds: 120 });
    await expect
      .poll(() => page.locator('#live-view .live-state').textContent(), { timeout: 20_000 })
      .toBe('you have the page');
    await canvas.scrollIntoViewIfNeeded();
    const box = await canvas.boundingBox();
    const frameWidth = await canvas.evaluate((element: HTMLCanvasElement) => element.width);
    if (!box) throw new Error('the live view has no box');
    const scale = box.width / frameWidth;
    await page.mouse.click(box.x + 20 * scale, box.y + 20 * scale);
    await page.keyboard.type('ada');
    const seen = await eventually(
      async () => typed.some((path) => path === '/typed?v=ada'),
      (found) => found,
      20_000,
    );
    expect(seen).toBe(true);
    mkdirSync('test-output/ui', { recursive: true });
    await page.screenshot({ path: 'test-output/ui/live-view-takeover.png', fullPage: true });
    // A batch the API refuses (here answered for it, as a rate limit would) is not dropped
    // silently: the person is told to type it again, not left with a password short a few keys.
    const problem = page.locator('#live-view .live-input-problem');
    expect(await problem.isHidden()).toBe(true);
    const refusal = { error: { code: 'rate_limited', message: 'more than 200 input events a second' } };
    await page.route('**/input', (route) => route.fulfill({ status: 429, json: refusal }));
    await page.keyboard.type('xy');
    await expect.poll(() => problem.isVisible(), { timeout: 20_000 }).toBe(true);
    expect(await problem.textContent()).toBe(
      'Some input did not reach the page (more than 200 input events a second); type it again.',
    );
    await page.unroute('**/input');
    await page.keyboard.type('z');
    await expect.poll(() => problem.isHidden(), { timeout: 20_000 }).toBe(true);
    await client.endPersonControl(lease, { holder: 'principal:dev' });
    await expect
      .poll(() => page.locator('#live-view .live-state').textContent(), { timeout: 20_000 })
      .toBe('waiting for you');
    await context.close();
  });

  it("draws a dialog of the page over the live view, and the holder's answer reaches the page", async () => {
    const { runId, profileId } = await parkedRun('/dialog');
    const context = await browser.newContext({ viewport: { width: 1100, height: 900 } });
    const page = await context.newPage();
    const base = fleet.urls.api.replace(/\/v1$/, '');
    await page.goto(`${base}/runs`);
    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/runs`);
    await page.goto(`${base}/runs/${runId}`);
    const canvas = page.locator('#live-view canvas');
    await expect.poll(() => canvas.getAttribute('data-frames'), { timeout: 20_000 }).not.toBeNull();

    const { client, lease } = await runLease(profileId);
    await client.startPersonControl(lease, { holder: 'principal:dev', seconds: 120 });
    await expect
      .poll(() => page.locator('#live-view .live-state').textContent(), { timeout: 20_000 })
      .toBe('you have the page');
    await canvas.scrollIntoViewIfNeeded();
    const box = await canvas.boundingBox();
    const frameWidth = await canvas.evaluate((element: HTMLCanvasElement) => element.width);
    if (!box) throw new Error('the live view has no box');
    const scale = box.width / frameWidth;
    await page.mouse.click(box.x + 20 * scale, box.y + 20 * scale);

    // No frame paints the prompt: the live view draws it, with the page that asked.
    const dialog = page.getByRole('alertdialog');
    await expect.poll(() => dialog.isVisible(), { timeout: 20_000 }).toBe(true);
    expect(await dialog.locator('.live-dialog-message').textContent()).toBe('Your name, please?');
    expect(await dialog.locator('.live-dialog-url').textContent()).toBe(`${origin}/dialog`);
    const answer = dialog.getByLabel('Your answer');
    expect(await answer.inputValue()).toBe('nobody');
    await answer.fill('Ada');
    mkdirSync('test-output/ui', { recursive: true });
    await page.screenshot({ path: 'test-output/ui/live-view-dialog.png', fullPage: true });
    await dialog.getByRole('button', { name: 'OK' }).click();
    const answered = await eventually(
      async () => typed.some((path) => path === '/answered?v=Ada'),
      (found) => found,
      20_000,
    );
    expect(answered).toBe(true);
    await expect.poll(() => dialog.isVisible(), { timeout: 20_000 }).toBe(false);
    await client.endPersonControl(lease, { holder: 'principal:dev' });
    await context.close();
  });
});
