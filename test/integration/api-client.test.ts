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

  it('changes and deletes what it made, and makes, reads, changes, pauses and deletes a schedule', async () => {
    const agent = await client.POST('/v1/agents', {
      body: { model: 'scripted', instructions: 'Read.', tools: ['browser.navigate'] },
    });
    if (!agent.data) throw new Error('no agent');
    const changed = await client.PATCH('/v1/agents/{id}', {
      params: { path: { id: agent.data.id } },
      body: { instructions: 'Read twice.' },
    });
    expect(changed.data).toMatchObject({ id: agent.data.id, latest_version: changed.data?.version });
    expect(changed.data?.version).not.toBe(agent.data.version);

    await client.POST('/v1/profiles', { body: { id: 'moving', allowed_origins: [origin] } });
    const moved = await client.PATCH('/v1/profiles/{id}', {
      params: { path: { id: 'moving' } },
      body: { protected: true },
    });
    expect(moved.data).toMatchObject({ id: 'moving', protected: true });
    const session = await client.POST('/v1/sessions', { body: { agent_id: agent.data.id } });
    if (!session.data) throw new Error('no session');

    const made = await client.POST('/v1/schedules', {
      body: {
        every_ms: 3_600_000,
        run: { session_id: session.data.id, input: 'Read', script: { steps: [], answer: 'Read.' } },
      },
    });
    expect(made.response.status).toBe(201);
    if (!made.data) throw new Error('no schedule');
    const id = made.data.id;
    const path = { params: { path: { id } } };
    expect((await client.GET('/v1/schedules')).data?.schedules.map((each) => each.id)).toEqual([id]);
    expect((await client.GET('/v1/schedules/{id}', path)).data).toMatchObject({ id, overlap: 'skip' });
    expect(
      (await client.PATCH('/v1/schedules/{id}', { ...path, body: { overlap: 'queue' } })).data,
    ).toMatchObject({
      overlap: 'queue',
    });
    expect((await client.POST('/v1/schedules/{id}/pause', path)).data).toMatchObject({ paused: true });
    expect((await client.POST('/v1/schedules/{id}/resume', path)).data).toMatchObject({ paused: false });
    // An interval's first due time is its start: at most that one run, made by this schedule.
    const fired = (await client.GET('/v1/schedules/{id}/runs', path)).data?.runs ?? [];
    expect(fired.length).toBeLessThanOrEqual(1);
    expect((await client.DELETE('/v1/schedules/{id}', path)).response.status).toBe(204);
    for (const each of fired) {
      expect(each.input).toMatchObject({ schedule: { id } });
      await runUntil(each.id, ['succeeded']);
    }
    expect((await client.GET('/v1/schedules/{id}', path)).response.status).toBe(404);

    const sessionPath = { params: { path: { id: session.data.id } } };
    expect((await client.DELETE('/v1/sessions/{id}', sessionPath)).response.status).toBe(204);
    expect(
      (await client.DELETE('/v1/profiles/{id}', { params: { path: { id: 'moving' } } })).response.status,
    ).toBe(204);
  });

  it("takes a parked run's page over, types on it, watches it and hands it back; signs a profile in by hand", async () => {
    await client.POST('/v1/profiles', { body: { id: 'person', allowed_origins: [origin] } });
    const agent = await client.POST('/v1/agents', {
      body: { model: 'scripted', instructions: 'Order.', tools: ['browser.navigate', 'browser.act'] },
    });
    const session = await client.POST('/v1/sessions', {
      body: { agent_id: agent.data?.id ?? '', browser_profile_id: 'person' },
    });
    const submitted = await client.POST('/v1/sessions/{id}/runs', {
      params: { path: { id: session.data?.id ?? '' }, header: {} },
      body: {
        input: 'Order',
        script: {
          steps: [{ tool: 'browser.navigate', url: `${origin}/person/` }, order],
          answer: 'Ordered.',
        },
      },
    });
    const runId = submitted.data?.id ?? '';
    const parked = await runUntil(runId, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    const run = { params: { path: { id: runId } } };
    expect((await client.POST('/v1/runs/{id}/takeover', run)).data).toMatchObject({ state: 'held' });
    const keys = [
      { type: 'key', action: 'down', key: 'Tab', code: 'Tab' },
      { type: 'key', action: 'up', key: 'Tab', code: 'Tab' },
    ] as const;
    expect(
      (await client.POST('/v1/runs/{id}/input', { ...run, body: { events: [...keys] } })).response.status,
    ).toBe(200);
    // A live view is a stream: its status and type are read, and it is let go.
    const live = await client.GET('/v1/runs/{id}/live', { ...run, parseAs: 'stream' });
    expect(live.response.status).toBe(200);
    expect(live.response.headers.get('content-type')).toContain('text/event-stream');
    await live.response.body?.cancel();
    expect((await client.POST('/v1/runs/{id}/handback', run)).data).toMatchObject({ state: 'handed_back' });
    expect((await client.POST('/v1/runs/{id}/cancel', run)).response.status).toBe(200);
    await runUntil(runId, ['cancelled']);

    await client.POST('/v1/profiles', { body: { id: 'by-hand', allowed_origins: [origin] } });
    const profile = { id: 'by-hand' };
    for (const end of ['cancel', 'done'] as const) {
      const opened = await client.POST('/v1/profiles/{id}/sign-in', {
        params: { path: profile },
        body: { url: `${origin}/login` },
      });
      expect(opened.response.status).toBe(201);
      const signIn = { params: { path: { ...profile, signin: opened.data?.signin_id ?? '' } } };
      expect((await client.GET('/v1/profiles/{id}/sign-ins/{signin}', signIn)).data).toMatchObject({
        status: 'open',
      });
      expect(
        (await client.POST('/v1/profiles/{id}/sign-ins/{signin}/heartbeat', signIn)).response.status,
      ).toBe(200);
      const typed = await client.POST('/v1/profiles/{id}/sign-ins/{signin}/input', {
        ...signIn,
        body: { events: [...keys] },
      });
      expect(typed.response.status).toBe(200);
      const watched = await client.GET('/v1/profiles/{id}/sign-ins/{signin}/live', {
        ...signIn,
        parseAs: 'stream',
      });
      expect(watched.response.status).toBe(200);
      await watched.response.body?.cancel();
      const ended =
        end === 'cancel'
          ? await client.POST('/v1/profiles/{id}/sign-ins/{signin}/cancel', signIn)
          : await client.POST('/v1/profiles/{id}/sign-ins/{signin}/done', signIn);
      expect(ended.data).toMatchObject({ status: end === 'cancel' ? 'cancelled' : 'done' });
    }
    expect(
      (await client.GET('/v1/profiles/{id}', { params: { path: profile } })).data?.last_signed_in,
    ).not.toBeNull();
  });

  it('has called every /v1 operation the document names', () => {
    const missed = documentedOperations().filter(
      (operation) => !called.some((call) => callMatches(operation, call)),
    );
    expect(missed).toEqual([]);
  });
});
