import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetHandle, startFleet } from '../../apps/fleet/fleet.js';
import { loadConfig } from '../../libs/config/index.js';
import { latestObservation, type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';
import { restClient } from '../fixtures/rest.js';

const PASSWORD = 'hunter2-Sw0rdf1sh-4242';

/** A sign-in page whose server keeps every posted body: the password must arrive there, and only there. */
function startLoginSite(): Promise<{ server: Server; origin: string; posted: string[] }> {
  const posted: string[] = [];
  const server = createServer((request, response) => {
    response.setHeader('content-type', 'text/html');
    if (request.method === 'POST') {
      let body = '';
      request.on('data', (chunk: Buffer) => {
        body += chunk.toString('utf8');
      });
      request.on('end', () => {
        posted.push(body);
        response.end('<!doctype html><title>Home</title><h1>Welcome back</h1>');
      });
      return;
    }
    response.end(`<!doctype html><title>Sign in</title><h1>Sign in</h1>
      <form method="post" action="/session">
        <label>User <input name="user" value="ada"></label>
        <label>Password <input type="password" name="password"></label>
        <button type="submit">Sign in</button>
      </form>`);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, posted }),
    ),
  );
}

/**
 * Text filled into a password field reaches the page and nowhere else — not
 * the transcript, the ledger, the events, the approval the owner reads, the logs or any Redis value
 * — while the run parked on its approval still types the real text when it resumes.
 */
describe('a password a run types never leaves the browser in a record', { timeout: 90_000 }, () => {
  const prefix = uniquePrefix('password-args');
  const logLines: string[] = [];
  let fleet: FleetHandle;
  let site: Awaited<ReturnType<typeof startLoginSite>>;
  let model: ModelServer;
  let opsDir: string;
  let redis: Redis;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = await startLoginSite();
    // The played model signs in: navigate, fill the password, click Sign in, answer.
    model = await startModelServer({
      policy: (body) => {
        const page = latestObservation(body);
        if (!page)
          return { tool_calls: [{ name: 'browser__navigate', arguments: { url: `${site.origin}/` } }] };
        if (page.elements.some((element) => element.name === 'Welcome back'))
          return { content: 'Signed in.' };
        const password = page.elements.find((element) => element.name === 'Password');
        if (password && password.state?.value_present !== true)
          return {
            tool_calls: [
              {
                name: 'browser__act',
                arguments: { revision: page.revision, element: password.ref, action: 'fill', text: PASSWORD },
              },
            ],
          };
        const submit = page.elements.find(
          (element) => element.role === 'button' && element.name === 'Sign in',
        );
        if (!submit) return { content: 'No sign-in button.' };
        return {
          tool_calls: [
            {
              name: 'browser__act',
              arguments: { revision: page.revision, element: submit.ref, action: 'click' },
            },
          ],
        };
      },
    });
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  signer:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: SIGNER_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 100000
`);
    const sink = new Writable({
      write(chunk: Buffer, _encoding, done) {
        logLines.push(chunk.toString('utf8'));
        done();
      },
    });
    fleet = await startFleet({
      config: loadConfig({
        REDIS_URL: testRedisUrl(),
        LEASEHOLD_KEY_PREFIX: `${prefix}:`,
        QUEUE_PREFIX: prefix,
        PORT: '0',
        BROWSER_WORKER_PORT: '0',
        LOG_LEVEL: 'debug',
        LEASEHOLD_OPS_DIR: opsDir,
        SIGNER_API_KEY: model.apiKey,
        ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      }),
      logger: pino({ level: 'debug' }, sink),
    });
    redis = new Redis(testRedisUrl());
    await call('POST', '/v1/profiles', { id: 'bank', allowed_origins: [site.origin] });
  });

  afterAll(async () => {
    await fleet?.close();
    await model?.close();
    await new Promise((resolve) => site?.server.close(resolve));
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  it('types the real password after the approval, and records [secret] everywhere else', async () => {
    const session = await call('POST', '/v1/sessions', { browser_profile_id: 'bank', model: 'signer' });
    expect(session.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, { input: 'Sign in to the bank' });
    expect(run.status).toBe(201);
    const runId = run.body.id as string;

    const parked = await waitForStatus(runId, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    const approvals = await call('GET', '/v1/approvals');
    const pending = approvals.body.approvals.find(
      (approval: { id: string }) => approval.id === parked.pending_approvals[0].id,
    );
    // The owner sees what is asked — a fill of the password field — but not the password.
    expect(pending.arguments).toMatchObject({ action: 'fill', text: '[secret]' });
    expect(JSON.stringify(approvals.body)).not.toContain(PASSWORD);

    // Parked, the execution ended: the resumed one (a new execution) types the real text.
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 5 },
    });
    expect(approved.status).toBe(200);
    const done = await waitForStatus(runId, ['succeeded', 'failed']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Signed in.' } });
    expect(site.posted).toHaveLength(1);
    expect(new URLSearchParams(site.posted[0]).get('password')).toBe(PASSWORD);

    const view = await call('GET', `/v1/runs/${runId}`);
    expect(JSON.stringify(view.body)).not.toContain(PASSWORD);
    const events = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    const eventText = await events.text();
    expect(eventText).toContain('approval.requested');
    expect(eventText).not.toContain(PASSWORD);
    const afterApprovals = await call('GET', '/v1/approvals');
    expect(JSON.stringify(afterApprovals.body)).not.toContain(PASSWORD);

    const values = await storedValues(redis, prefix);
    const transcript = [...values.entries()].find(
      ([key]) => key.includes(runId) && key.endsWith('transcript'),
    );
    expect(transcript?.[1]).toContain('[secret]');
    const ledger = [...values.entries()].find(([key]) => key.includes(runId) && key.endsWith('ledger'));
    expect(ledger).toBeDefined();
    const holding = [...values.entries()].filter(([, value]) => value.includes(PASSWORD)).map(([key]) => key);
    expect(holding).toEqual([]);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.filter((line) => line.includes(PASSWORD))).toEqual([]);
  });

  it("keeps a scripted run's password to the script it was given: no transcript, approval or event holds it", async () => {
    const scripted = 'Sc1pted-pa55word-7777';
    expect(
      (await call('POST', '/v1/profiles', { id: 'bank-scripted', allowed_origins: [site.origin] })).status,
    ).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Sign in.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'bank-scripted',
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Sign in by script',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${site.origin}/` },
          {
            tool: 'browser.act',
            target: { role: 'textbox', name: 'Password' },
            action: 'fill',
            text: scripted,
          },
          { tool: 'browser.act', target: { role: 'button', name: 'Sign in' }, action: 'click' },
        ],
        answer: 'Signed in by script.',
      },
    });
    expect(run.status).toBe(201);
    const runId = run.body.id as string;
    const parked = await waitForStatus(runId, ['parked', 'failed', 'succeeded']);
    expect(parked, JSON.stringify(parked.error)).toMatchObject({ status: 'parked' });
    const pending = await call('GET', '/v1/approvals');
    expect(JSON.stringify(pending.body)).toContain('"text":"[secret]"');
    expect(JSON.stringify(pending.body)).not.toContain(scripted);
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 5 },
    });
    expect(approved.status).toBe(200);
    const done = await waitForStatus(runId, ['succeeded', 'failed']);
    expect(done, JSON.stringify(done.error)).toMatchObject({
      status: 'succeeded',
      result: { answer: 'Signed in by script.' },
    });
    expect(new URLSearchParams(site.posted.at(-1)).get('password')).toBe(scripted);

    expect(JSON.stringify((await call('GET', '/v1/approvals')).body)).not.toContain(scripted);
    const events = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(await events.text()).not.toContain(scripted);
    // The script is the run's input as its owner submitted it: the run record keeps it (a known
    // limit, reported); no record the run made — transcript, ledger, approvals, events — holds it.
    const values = await storedValues(redis, prefix);
    const holding = [...values.entries()].filter(([, value]) => value.includes(scripted)).map(([key]) => key);
    expect(holding).toEqual([`${prefix}:{run:${runId}}:run`]);
    expect(logLines.filter((line) => line.includes(scripted))).toEqual([]);
  });
});
