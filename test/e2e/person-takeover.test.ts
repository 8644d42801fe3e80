import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino from 'pino';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { DataPlaneClient, ProviderError } from '../../libs/provider/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type LoginSite, startLoginSite } from '../fixtures/login-site.js';
import {
  type ChatRequestBody,
  latestObservation,
  type ModelServer,
  type PolicyReply,
  startModelServer,
} from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';

/** Ada's password: typed by the person alone, into the page, never given to the run. */
const PASSWORD = 'Heron-velvet-5302-quill';
const SIGN_IN = 'Sign in for me';
const ACT_WHILE_HELD = 'Search while a person holds the page';
const PAUSE_RUNNING = 'Look twice, and let a person in between';

function toolResults(body: ChatRequestBody): Array<{ ok: boolean; code?: string; result?: unknown }> {
  return body.messages
    .filter((message) => message.role === 'tool')
    .map((message) => JSON.parse(String(message.content)));
}

const call = (name: string, args: Record<string, unknown>): PolicyReply => ({
  tool_calls: [{ name: name.replace('.', '__'), arguments: args }],
});

/**
 * A person on the run's page, through the whole fleet: a model (the OpenAI-compatible adapter
 * against a local model server) reaches a sign-in page and asks for a person; the run's principal
 * opens the run page in Chromium, takes the page over, signs in through the streamed view with a
 * password only they know, and hands it back; the run goes on signed in.
 */
describe('a person on the run’s page: asked for, taken over, handed back', { timeout: 300_000 }, () => {
  const prefix = uniquePrefix('person');
  const token = randomBytes(32).toString('base64url');
  const logLines: string[] = [];
  let fleet: FleetHandle;
  let site: LoginSite;
  let model: ModelServer;
  let receiver: WebhookReceiver;
  let opsDir: string;
  let redis: Redis;
  let eveKey: string;
  let otherTenantKey: string;
  let browser: Browser;
  /** Released by the test once it asked to take a running run over. */
  let releaseSecondLook: () => void = () => undefined;
  const secondLook = new Promise<void>((resolve) => {
    releaseSecondLook = resolve;
  });
  const rest = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const { call: api, waitForStatus } = rest;

  beforeAll(async () => {
    site = await startLoginSite({ ada: PASSWORD });
    const origin = () => site.origin;
    model = await startModelServer({
      policy: async (body) => {
        const input = String(body.messages.find((message) => message.role === 'user')?.content ?? '');
        const done = toolResults(body).length;
        if (input === SIGN_IN) {
          if (done === 0) return call('browser.navigate', { url: `${origin()}/` });
          if (done === 1) return call('browser.request_person', { reason: 'Sign in, then hand back' });
          const signedIn = JSON.stringify(toolResults(body).at(-1)).includes('Signed in as ada');
          return { content: signedIn ? 'Signed in as ada.' : 'Not signed in.' };
        }
        if (input === ACT_WHILE_HELD) {
          if (done === 0) return call('browser.navigate', { url: `${origin()}/search` });
          if (done === 1) {
            const page = latestObservation(body);
            const box = page?.elements.find((element) => element.role === 'searchbox');
            if (!page || !box) return { content: 'no search box' };
            return call('browser.act', {
              revision: page.revision,
              element: box.ref,
              action: 'fill',
              text: 'shoes',
            });
          }
          return { content: 'Searched.' };
        }
        if (input === PAUSE_RUNNING) {
          if (done === 0) return call('browser.navigate', { url: `${origin()}/` });
          if (done === 1) {
            // The test asks for a takeover while this turn is out: the run pauses before its call.
            await secondLook;
            return call('browser.observe', {});
          }
          const told = body.messages.some(
            (message) =>
              message.role === 'user' && String(message.content).includes('A person held the page'),
          );
          return { content: told ? 'Told of the person.' : 'Not told.' };
        }
        return { content: `no play for ${input}` };
      },
    });
    receiver = await startWebhookReceiver();
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  agent:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: AGENT_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 272000
    max_output_tokens: 1024
`);
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    fleet = await startTestFleet(
      prefix,
      {
        LOG_LEVEL: 'debug',
        LEASEHOLD_OPS_DIR: opsDir,
        AGENT_API_KEY: model.apiKey,
        LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true',
        LEASEHOLD_DATA_PLANE_TOKEN: token,
      },
      { logger: pino({ level: 'debug' }, sink) },
    );
    redis = new Redis(testRedisUrl());
    browser = await launchTestBrowser();
    eveKey = (
      await fleet.store.createApiKey({
        tenant: 'dev',
        principal: 'eve',
        scopes: ['runs:read', 'runs:write', 'approvals:write', 'approvals:any'],
      })
    ).key;
    otherTenantKey = (
      await fleet.store.createApiKey({
        tenant: 'other',
        principal: 'mallory',
        scopes: ['admin', 'runs:write'],
      })
    ).key;
    expect((await api('POST', '/v1/profiles', { id: 'shop', allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const hook = await api('POST', '/v1/webhooks', {
      url: receiver.url,
    });
    expect(hook.status).toBe(201);
  });

  afterAll(async () => {
    releaseSecondLook();
    await browser?.close();
    await fleet?.close();
    await site?.close();
    await model?.close();
    await receiver?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  async function submit(input: string): Promise<string> {
    const session = await api('POST', '/v1/sessions', { browser_profile_id: 'shop', model: 'agent' });
    expect(session.status).toBe(201);
    const submitted = await api('POST', `/v1/sessions/${session.body.id}/runs`, { input });
    expect(submitted.status).toBe(201);
    return submitted.body.id as string;
  }

  /** The run's live lease on the data plane, as the API's input relay reaches it. */
  async function liveLease(runId: string) {
    const leases = new RedisLeaseStore(redis, `${prefix}:`);
    const profile = { tenant: 'dev', id: 'shop' };
    const leaseId = await leases.liveLeaseId(profile);
    const record = leaseId ? await leases.getLease(profile, leaseId) : undefined;
    expect(record?.scope.run_id).toBe(runId);
    const client = new DataPlaneClient({ baseUrl: fleet.urls.browserWorker, token });
    return { client, lease: { profile, leaseId: record?.id ?? '' }, sequence: record?.sequence ?? 0 };
  }

  async function eventsOf(runId: string): Promise<string> {
    const response = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    return response.text();
  }

  async function stepsOf(runId: string) {
    const page = await api('GET', `/v1/runs/${runId}/steps?limit=100`);
    expect(page.status).toBe(200);
    return page.body.steps as Array<{ tool: { name: string; person: unknown } | null }>;
  }

  it('signs in by a person the model asked for, and the password is kept nowhere', async () => {
    const runId = await submit(SIGN_IN);
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 90_000);
    expect(parked.status).toBe('parked');
    expect(parked.pending_approvals).toHaveLength(1);
    const request = parked.pending_approvals[0];
    expect(request).toMatchObject({
      kind: 'person',
      tool: 'browser.request_person',
      person: { reason: 'Sign in, then hand back', holder: null },
    });
    // Never past the run's deadline.
    expect(request.person.expires_at_ms).toBeLessThanOrEqual(parked.deadline_at_ms);

    // Another tenant does not see the run on either route; another principal may not take it over.
    for (const path of ['takeover', 'handback'])
      expect(
        (await api('POST', `/v1/runs/${runId}/${path}`, undefined, { key: otherTenantKey })).status,
      ).toBe(404);
    expect((await api('POST', `/v1/runs/${runId}/takeover`, undefined, { key: eveKey })).status).toBe(403);

    // The person opens the run page in Chromium, signs in to it, and takes the page over.
    const context = await browser.newContext({ viewport: { width: 1100, height: 1400 } });
    const page = await context.newPage();
    const base = fleet.urls.api.replace(/\/v1$/, '');
    await page.goto(`${base}/runs`);
    await page.getByLabel('API key').fill(fleet.apiKey);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.waitForURL(`${base}/runs`);
    await page.goto(`${base}/runs/${runId}`);
    await expect
      .poll(() => page.locator('.person-request .reason').textContent())
      .toBe('Sign in, then hand back');
    const state = page.locator('#live-view .live-state');
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe('waiting for you');
    mkdirSync('test-output/ui', { recursive: true });
    await page.screenshot({ path: 'test-output/ui/person-requested.png', fullPage: true });
    await page.getByRole('button', { name: 'Take over' }).click();
    await expect.poll(() => state.textContent(), { timeout: 20_000 }).toBe('you have the page');
    const held = (await api('GET', `/v1/runs/${runId}`)).body;
    expect(held.status).toBe('parked');
    expect(held.pending_approvals[0]).toMatchObject({ id: request.id, person: { holder: 'principal:dev' } });

    // One person at a time: while dev holds the page, anyone else hears so.
    const second = await api('POST', `/v1/runs/${runId}/takeover`, undefined, { key: eveKey });
    expect(second.status).toBe(409);
    expect(second.body.error.code).toBe('person_in_control');

    // The person types into the streamed view: focus it, Tab to the username, the password, Enter.
    const canvas = page.locator('#live-view canvas');
    await expect.poll(() => canvas.getAttribute('data-frames'), { timeout: 20_000 }).not.toBeNull();
    await canvas.scrollIntoViewIfNeeded();
    const box = await canvas.boundingBox();
    if (!box) throw new Error('the live view has no box');
    await page.mouse.click(box.x + box.width - 5, box.y + box.height - 5);
    await page.keyboard.press('Tab');
    await page.keyboard.type('ada');
    await page.keyboard.press('Tab');
    await page.keyboard.type(PASSWORD);
    await page.keyboard.press('Enter');
    await expect
      .poll(() => site.attempts, { timeout: 30_000 })
      .toContainEqual({
        username: 'ada',
        passwordMatched: true,
      });
    await expect
      .poll(() => page.locator('#live-view .live-url').textContent(), { timeout: 20_000 })
      .toContain('/account');
    await page.screenshot({ path: 'test-output/ui/person-takeover.png', fullPage: true });

    await page.getByRole('button', { name: 'Hand back' }).click();
    const ended = await waitForStatus(runId, ['succeeded', 'failed'], 90_000);
    expect({ status: ended.status, error: ended.error }).toEqual({ status: 'succeeded', error: null });
    expect(ended.result).toMatchObject({ answer: 'Signed in as ada.' });

    await context.close();

    // The model heard how long, how many inputs and where: never what was typed.
    const last = model.requests.at(-1)?.body as ChatRequestBody;
    const answer = toolResults(last).at(-1) as {
      ok: boolean;
      result: { person: { inputs: number; end_url: string } };
    };
    expect(answer.ok).toBe(true);
    expect(answer.result.person.inputs).toBeGreaterThan(PASSWORD.length);
    expect(answer.result.person.end_url).toContain('/account');
    for (const sent of model.requests) expect(JSON.stringify(sent.body)).not.toContain(PASSWORD);

    // The step of the call records the takeover.
    const steps = await stepsOf(runId);
    const asked = steps.find((step) => step.tool?.name === 'browser.request_person');
    expect(asked?.tool?.person).toMatchObject({
      holder: 'principal:dev',
      inputs: answer.result.person.inputs,
    });
    expect(JSON.stringify(steps)).not.toContain(PASSWORD);

    // Events and webhooks: asked, taken over, handed back; never the password.
    const events = await eventsOf(runId);
    for (const type of ['person.requested', 'person.taken_over', 'person.handed_back'])
      expect(events).toContain(type);
    expect(events).not.toContain(PASSWORD);
    await expect
      .poll(() => receiver.got.some(({ body }) => body.includes(runId) && body.includes('person.requested')))
      .toBe(true);
    expect(receiver.got.filter(({ body }) => body.includes(PASSWORD))).toEqual([]);

    // Logs and every Redis value of the fleet (transcripts, steps, events, approvals included).
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.filter((line) => line.includes(PASSWORD))).toEqual([]);
    expect(
      [...(await storedValues(redis, prefix)).values()].filter((value) => value.includes(PASSWORD)),
    ).toEqual([]);
  });

  it('refuses the run’s own act before dispatch while a person holds its page', async () => {
    const runId = await submit(ACT_WHILE_HELD);
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 90_000);
    expect(parked.pending_approvals).toMatchObject([{ kind: 'action', tool: 'browser.act' }]);
    const taken = await api('POST', `/v1/runs/${runId}/takeover`);
    expect(taken.body).toMatchObject({ state: 'held' });
    // The act is approved while the person holds the page: the run waits for the hand-back.
    const approved = await api('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(approved.status).toBe(200);
    expect((await api('GET', `/v1/runs/${runId}`)).body.status).toBe('parked');
    // A page call on the lease meanwhile is refused before it is sent: the site counts nothing.
    const { client, lease, sequence } = await liveLease(runId);
    const refused = await client
      .act(lease.profile, lease.leaseId, sequence + 1, { revision: 'r', element: 'e1', action: 'click' })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ProviderError);
    expect((refused as ProviderError).code).toBe('person_in_control');
    expect(site.effects).toEqual([]);

    expect((await api('POST', `/v1/runs/${runId}/handback`)).status).toBe(200);
    const ended = await waitForStatus(runId, ['succeeded', 'failed'], 90_000);
    expect(ended.status).toBe('succeeded');
  });

  it('pauses a running run at its next safe point when its principal takes it over', async () => {
    const runId = await submit(PAUSE_RUNNING);
    // The model's second turn is out: the takeover can only be obeyed before its call.
    const turnsOf = () =>
      model.requests.filter((sent) =>
        sent.body.messages.some((message) => message.role === 'user' && message.content === PAUSE_RUNNING),
      ).length;
    await expect.poll(turnsOf, { timeout: 60_000 }).toBe(2);
    expect((await api('GET', `/v1/runs/${runId}`)).body.status).toBe('running');
    const asked = await api('POST', `/v1/runs/${runId}/takeover`);
    expect(asked.status).toBe(200);
    expect(asked.body.state).toBe('pausing');
    releaseSecondLook();
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed'], 60_000);
    expect(parked.status).toBe('parked');
    expect(parked.pending_approvals).toMatchObject([
      { kind: 'person', tool: 'person.takeover', person: { holder: 'principal:dev' } },
    ]);
    expect((await api('POST', `/v1/runs/${runId}/handback`)).status).toBe(200);
    const ended = await waitForStatus(runId, ['succeeded', 'failed'], 90_000);
    expect(ended.result).toMatchObject({ answer: 'Told of the person.' });
  });
});
