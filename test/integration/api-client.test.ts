import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import {
  createLeaseholdClient,
  type LeaseholdClient,
  type SubmitRun,
} from '../../clients/typescript/index.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';

/** Every operation of the committed document, as `METHOD /v1/path/{param}`. */
function documentedOperations(): string[] {
  const document = JSON.parse(readFileSync(new URL('../../openapi/api.json', import.meta.url), 'utf8')) as {
    paths: Record<string, Record<string, unknown>>;
  };
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    Object.keys(operations).map((method) => `${method.toUpperCase()} ${path}`),
  );
}

/** Whether `called` (`METHOD /v1/runs/run_x`) is an operation `documented` (`METHOD /v1/runs/{id}`). */
function callMatches(documented: string, called: string): boolean {
  const pattern = documented.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+');
  return new RegExp(`^${pattern}$`).test(called);
}

/**
 * The generated client against a live fleet. Every /v1 operation of the document is
 * called through `createLeaseholdClient` (its `fetch` counts the calls), with real answers: a run
 * submitted, parked on an approval of a real click, approved, ended, streamed; another denied and
 * retried; keys and webhooks made and removed.
 */
describe('the generated TypeScript client, against a live fleet', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let client: LeaseholdClient;
  let site: Server;
  let origin: string;
  const called: string[] = [];
  let clicks = 0;

  beforeAll(async () => {
    site = createServer((request, response) => {
      if (request.method === 'POST' && request.url?.endsWith('/click')) {
        clicks += 1;
        return void response.end('ok');
      }
      response.setHeader('content-type', 'text/html');
      response.end(
        `<!doctype html><title>Order</title><h1>Order</h1><button onclick="fetch('click', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Ordered</h2>'))">Order</button>`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('api-client'), { LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true' });
    client = createLeaseholdClient({
      baseUrl: fleet.urls.api,
      apiKey: fleet.apiKey,
      fetch: (request) => {
        called.push(`${request.method} ${new URL(request.url).pathname}`);
        return fetch(request);
      },
    });
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  async function runUntil(id: string, statuses: string[]) {
    const run = await eventually(
      async () => (await client.GET('/v1/runs/{id}', { params: { path: { id } } })).data,
      (detail) => detail !== undefined && statuses.includes(detail.status),
      30_000,
      100,
    );
    if (!run) throw new Error(`run ${id} could not be read`);
    expect(statuses).toContain(run.status);
    return run;
  }

  const order = {
    tool: 'browser.act',
    target: { role: 'button', name: 'Order' },
    action: 'click',
    postcondition: { role: 'heading', name: 'Ordered', wait_ms: 2_000 },
  } as const;

  it('works a run from its profile through an approval to its end, steps, artifact and events', async () => {
    const models = await client.GET('/v1/models');
    expect(models.data?.models.map((model) => model.name)).toContain('scripted');

    const profile = await client.POST('/v1/profiles', { body: { id: 'shop', allowed_origins: [origin] } });
    expect(profile.response.status).toBe(201);
    expect(profile.data).toMatchObject({ id: 'shop', tenant: 'dev', sealed: false });
    const again = await client.POST('/v1/profiles', { body: { id: 'shop', allowed_origins: [origin] } });
    expect(again.response.status).toBe(409);
    expect(again.error?.error.code).toBe('conflict');
    expect((await client.GET('/v1/profiles')).data?.profiles.map((each) => each.id)).toEqual(['shop']);
    expect((await client.GET('/v1/profiles/{id}', { params: { path: { id: 'shop' } } })).data).toEqual({
      id: 'shop',
      allowed_origins: [origin],
      frame_origins: [],
      subresources: 'any',
      protected: false,
      sealed: false,
      seal_fault: null,
      last_signed_in: null,
    });

    const definition = {
      model: 'scripted',
      instructions: 'Order.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    };
    const agent = await client.POST('/v1/agents', { body: definition });
    expect(agent.response.status).toBe(201);
    if (!agent.data) throw new Error('no agent');
    const changed = await client.PUT('/v1/agents/{id}', {
      params: { path: { id: agent.data.id } },
      body: { ...definition, instructions: 'Order, once.' },
    });
    expect(changed.data?.version).not.toBe(agent.data.version);
    const read = await client.GET('/v1/agents/{id}', { params: { path: { id: agent.data.id } } });
    expect(read.data?.latest_version).toBe(changed.data?.version);

    const session = await client.POST('/v1/sessions', {
      body: { agent_id: agent.data.id, browser_profile_id: 'shop' },
    });
    expect(session.response.status).toBe(201);
    if (!session.data) throw new Error('no session');
    const sessionId = session.data.id;
    expect((await client.GET('/v1/sessions/{id}', { params: { path: { id: sessionId } } })).data).toEqual(
      session.data,
    );

    const body: SubmitRun = {
      input: 'Order once',
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/shop/` }, order], answer: 'Ordered.' },
    };
    const submit = () =>
      client.POST('/v1/sessions/{id}/runs', {
        params: { path: { id: sessionId }, header: { 'idempotency-key': 'order-once' } },
        body,
      });
    const submitted = await submit();
    expect(submitted.response.status).toBe(201);
    if (!submitted.data) throw new Error('no run');
    const runId = submitted.data.id;
    const repeated = await submit();
    expect(repeated.response.status).toBe(200);
    expect(repeated.data?.id).toBe(runId);

    const parked = await runUntil(runId, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    expect(clicks).toBe(0);
    const pending = await client.GET('/v1/approvals', { params: { query: { run_id: runId } } });
    expect(pending.data?.approvals.map((approval) => approval.id)).toEqual(
      parked.pending_approvals.map((approval) => approval.id),
    );
    const approvalId = parked.pending_approvals[0]?.id ?? '';
    const approved = await client.POST('/v1/approvals/{id}/approve', {
      params: { path: { id: approvalId } },
      body: { grant: { duration_ms: 60_000, max_actions: 1 } },
    });
    expect(approved.data).toMatchObject({ id: approvalId, status: 'approved' });

    const ended = await runUntil(runId, ['succeeded', 'failed']);
    expect(ended).toMatchObject({
      status: 'succeeded',
      result: { answer: 'Ordered.' },
      pending_approvals: [],
    });
    expect(clicks).toBe(1);

    const listed = await client.GET('/v1/runs', { params: { query: { session_id: sessionId } } });
    expect(listed.data?.runs.map((run) => run.id)).toEqual([runId]);

    const steps = await client.GET('/v1/runs/{id}/steps', { params: { path: { id: runId }, query: {} } });
    const tools = steps.data?.steps.flatMap((step) => (step.tool ? [step.tool] : [])) ?? [];
    expect(tools.map((tool) => tool.name)).toEqual(['browser.navigate', 'browser.act']);
    const screenshot = tools[1]?.screenshot;
    expect(screenshot).toMatch(/\.jpg$/);
    // The act answered before its screenshot was taken: it is fetched once the step says stored.
    await expect
      .poll(
        async () =>
          (
            await client.GET('/v1/runs/{id}/steps', { params: { path: { id: runId }, query: {} } })
          ).data?.steps
            .flatMap((step) => (step.tool ? [step.tool] : []))
            .find((tool) => tool.screenshot === screenshot)?.screenshot_status?.state,
        { timeout: 15_000 },
      )
      .toBe('stored');
    const artifact = await client.GET('/v1/runs/{id}/artifacts/{name}', {
      params: { path: { id: runId, name: screenshot ?? '' } },
      parseAs: 'arrayBuffer',
    });
    expect(artifact.response.headers.get('content-type')).toBe('image/jpeg');
    expect(new Uint8Array(artifact.data ?? new ArrayBuffer(0)).subarray(0, 2)).toEqual(
      new Uint8Array([0xff, 0xd8]),
    );

    // The click downloaded nothing: the run's files are none, and a file id it never had is 404.
    const files = await client.GET('/v1/runs/{id}/files', { params: { path: { id: runId } } });
    expect(files.data?.files).toEqual([]);
    const noFile = await client.GET('/v1/runs/{id}/files/{file}', {
      params: { path: { id: runId, file: 'fil_0123456789abcdefghjk' } },
      parseAs: 'arrayBuffer',
    });
    expect(noFile.response.status).toBe(404);

    // A file uploaded as a form's one part; its record read back by its id.
    const form = new FormData();
    form.append('file', new Blob(['id,total\n1,12.50\n'], { type: 'text/csv' }), 'orders.csv');
    const uploaded = await client.POST('/v1/files', {
      body: form as unknown as { file: string },
      bodySerializer: (sent) => sent as unknown as FormData,
    });
    expect(uploaded.response.status).toBe(201);
    if (!uploaded.data) throw new Error('no file');
    expect(uploaded.data).toEqual(
      expect.objectContaining({ name: 'orders.csv', content_type: 'text/csv', size_bytes: 17 }),
    );
    const file = await client.GET('/v1/files/{id}', { params: { path: { id: uploaded.data.id } } });
    expect(file.data).toEqual(uploaded.data);

    const events = await client.GET('/v1/runs/{id}/events', {
      params: { path: { id: runId }, query: {} },
      parseAs: 'text',
    });
    expect(events.response.headers.get('content-type')).toBe('text/event-stream');
    expect(events.data).toMatch(/^event: run\.succeeded$/m);

    const found = await client.GET('/v1/runs', {
      params: { query: { status: 'failed,succeeded', search: runId.slice(0, 12) } },
    });
    expect(found.data?.runs.map((run) => run.id)).toEqual([runId]);
    // The tenant's stream never ends by itself: read to its `ready`, then let it go.
    const tenantEvents = await client.GET('/v1/events', { parseAs: 'stream' });
    expect(tenantEvents.response.headers.get('content-type')).toBe('text/event-stream');
    const reader = tenantEvents.data?.getReader();
    const first = await reader?.read();
    expect(new TextDecoder().decode(first?.value)).toContain('event: ready');
    await reader?.cancel();
  });

  it('denies an approval, retries the failed run and cancels it, with body-less POSTs as the README sends them', async () => {
    const agent = await client.POST('/v1/agents', {
      body: { model: 'scripted', instructions: 'Order.', tools: ['browser.navigate', 'browser.act'] },
    });
    await client.POST('/v1/profiles', { body: { id: 'deny', allowed_origins: [origin] } });
    const scripted = await client.POST('/v1/sessions', {
      body: { agent_id: agent.data?.id ?? '', browser_profile_id: 'deny' },
    });
    const run = await client.POST('/v1/sessions/{id}/runs', {
      params: { path: { id: scripted.data?.id ?? '' }, header: {} },
      body: {
        input: 'Order',
        script: { steps: [{ tool: 'browser.navigate', url: `${origin}/deny/` }, order], answer: 'Ordered.' },
      },
    });
    expect(run.response.status).toBe(201);
    const runId = run.data?.id ?? '';
    const parked = await runUntil(runId, ['parked', 'failed', 'succeeded']);
    const denied = await client.POST('/v1/approvals/{id}/deny', {
      params: { path: { id: parked.pending_approvals[0]?.id ?? '' } },
      body: { reason: 'Not today' },
    });
    expect(denied.data).toMatchObject({ status: 'denied', reason: 'Not today' });
    const failed = await runUntil(runId, ['failed', 'succeeded', 'cancelled']);
    expect(failed).toMatchObject({ status: 'failed', error: { code: 'approval_denied' } });

    // The README's calls: content-type application/json and no body at all.
    const bare = { authorization: `Bearer ${fleet.apiKey}`, 'content-type': 'application/json' };
    const base = fleet.urls.api.replace(/\/v1$/, '');
    const retried = await fetch(`${base}/v1/runs/${runId}/retry`, { method: 'POST', headers: bare });
    expect(retried.status).toBe(200);
    expect(await retried.json()).toMatchObject({ id: runId, status: 'queued', attempt: 2 });
    const parkedAgain = await runUntil(runId, ['parked', 'failed', 'succeeded']);
    expect(parkedAgain.status).toBe('parked');
    const cancelled = await fetch(`${base}/v1/runs/${runId}/cancel`, { method: 'POST', headers: bare });
    expect(cancelled.status).toBe(200);
    expect(await cancelled.json()).toMatchObject({ id: runId, status: 'cancelled' });
    // And through the client, which sends no content type: an ended run cannot be cancelled again.
    const twice = await client.POST('/v1/runs/{id}/cancel', { params: { path: { id: runId } } });
    expect(twice.response.status).toBe(409);
    expect(twice.error?.error.code).toBe('conflict');
    const retriedAgain = await client.POST('/v1/runs/{id}/retry', { params: { path: { id: runId } } });
    expect(retriedAgain.response.status).toBe(409);
    expect(clicks).toBe(1);
  });

  it('issues, lists and revokes a key, and registers, reads and deletes a webhook', async () => {
    const created = await client.POST('/v1/api-keys', {
      body: { principal: 'ci-bot', scopes: ['runs:read'] },
    });
    expect(created.response.status).toBe(201);
    if (!created.data) throw new Error('no key');
    const other = createLeaseholdClient({ baseUrl: fleet.urls.api, apiKey: created.data.key });
    expect((await other.GET('/v1/profiles')).response.status).toBe(200);
    const keys = await client.GET('/v1/api-keys');
    expect(keys.data?.api_keys.map((key) => key.key_id)).toContain(created.data.key_id);
    expect(JSON.stringify(keys.data)).not.toContain(created.data.key);
    const revoked = await client.DELETE('/v1/api-keys/{id}', {
      params: { path: { id: created.data.key_id } },
    });
    expect(revoked.response.status).toBe(204);
    const refused = await other.GET('/v1/profiles');
    expect(refused.response.status).toBe(401);
    expect(refused.error?.error.code).toBe('unauthorized');

    const webhook = await client.POST('/v1/webhooks', {
      body: { url: `${origin}/hook`, events: ['run.ended'] },
    });
    expect(webhook.response.status).toBe(201);
    if (!webhook.data) throw new Error('no webhook');
    expect(webhook.data.secret.length).toBeGreaterThanOrEqual(32);
    const hooks = await client.GET('/v1/webhooks');
    expect(hooks.data?.webhooks).toEqual([
      {
        id: webhook.data.id,
        tenant: 'dev',
        url: `${origin}/hook`,
        events: ['run.ended'],
        created_at_ms: webhook.data.created_at_ms,
      },
    ]);
    const deliveries = await client.GET('/v1/webhooks/{id}/deliveries', {
      params: { path: { id: webhook.data.id } },
    });
    expect(deliveries.data?.deliveries).toEqual([]);
    const deleted = await client.DELETE('/v1/webhooks/{id}', { params: { path: { id: webhook.data.id } } });
    expect(deleted.response.status).toBe(204);
    const gone = await client.GET('/v1/webhooks/{id}/deliveries', {
      params: { path: { id: webhook.data.id } },
    });
    expect(gone.response.status).toBe(404);
    expect(gone.error?.error.code).toBe('not_found');
  });

  it('has called every /v1 operation the document names', () => {
    const missed = documentedOperations().filter(
      (operation) => !called.some((call) => callMatches(operation, call)) && !CALLED_ELSEWHERE.has(operation),
    );
    expect(missed).toEqual([]);
  });
});

/**
 * Operations of this wave called through the typed client elsewhere, not yet here: the CLI's
 * (test/e2e/cli.test.ts: profiles, sessions, agents, schedules, takeover) and the e2e tests of the
 * person on the page and of profile sign-ins, which need a live page.
 */
const CALLED_ELSEWHERE = new Set([
  'PATCH /v1/agents/{id}',
  'DELETE /v1/profiles/{id}',
  'PATCH /v1/profiles/{id}',
  'POST /v1/profiles/{id}/sign-in',
  'GET /v1/profiles/{id}/sign-ins/{signin}',
  'POST /v1/profiles/{id}/sign-ins/{signin}/cancel',
  'POST /v1/profiles/{id}/sign-ins/{signin}/done',
  'POST /v1/profiles/{id}/sign-ins/{signin}/heartbeat',
  'POST /v1/profiles/{id}/sign-ins/{signin}/input',
  'GET /v1/profiles/{id}/sign-ins/{signin}/live',
  'POST /v1/runs/{id}/handback',
  'POST /v1/runs/{id}/input',
  'GET /v1/runs/{id}/live',
  'POST /v1/runs/{id}/takeover',
  'GET /v1/schedules',
  'POST /v1/schedules',
  'DELETE /v1/schedules/{id}',
  'GET /v1/schedules/{id}',
  'PATCH /v1/schedules/{id}',
  'POST /v1/schedules/{id}/pause',
  'POST /v1/schedules/{id}/resume',
  'GET /v1/schedules/{id}/runs',
  'DELETE /v1/sessions/{id}',
]);
