import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { closedLoopbackPort } from '../fixtures/closed-port.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * A site whose pages the server counts: `/` has a Pay button; `/moving` replaces its own document
 * 1.5 s after it loads (a page that changes under a parked run).
 */
function startSite(): Promise<{ server: Server; origin: string; hits: Map<string, number> }> {
  const hits = new Map<string, number>();
  const server = createServer((request, response) => {
    const path = request.url ?? '/';
    hits.set(path, (hits.get(path) ?? 0) + 1);
    response.setHeader('content-type', 'text/html');
    if (path === '/moving') {
      response.end(`<!doctype html><title>Moving</title><button>Pay</button>
        <script>setTimeout(() => location.replace('/moved'), 1500)</script>`);
      return;
    }
    response.end(`<!doctype html><title>Site ${path}</title><h1>Welcome</h1><button>Pay</button>`);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, hits }),
    ),
  );
}

const ENDED = ['succeeded', 'failed', 'cancelled'];

/** A fleet with one profile on the site and a scripted agent; `session()` binds a new session to it. */
function rig(name: string, env: Record<string, string> = {}) {
  const context = {} as { fleet: FleetHandle; site: Awaited<ReturnType<typeof startSite>>; agentId: string };
  const rest = restClient(
    () => context.fleet.urls.api,
    () => context.fleet.apiKey,
  );
  beforeAll(async () => {
    context.site = await startSite();
    context.fleet = await startTestFleet(uniquePrefix(name), env);
    expect(
      (await rest.call('POST', '/v1/profiles', { id: 'site', allowed_origins: [context.site.origin] }))
        .status,
    ).toBe(201);
    const agent = await rest.call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Follow the script.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    context.agentId = agent.body.id;
  });
  afterAll(async () => {
    await context.fleet?.close();
    await new Promise((resolve) => context.site?.server.close(resolve));
  });
  async function submit(script: unknown): Promise<string> {
    const session = await rest.call('POST', '/v1/sessions', {
      agent_id: context.agentId,
      browser_profile_id: 'site',
    });
    const submitted = await rest.call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Follow the script',
      script,
    });
    expect(submitted.status).toBe(201);
    return submitted.body.id;
  }
  /** The run's last event: its end, which carries the same error as the view. */
  async function finalEvent(runId: string) {
    return (await context.fleet.store.readEvents(runId))
      .filter((event) => event.type.startsWith('run.'))
      .at(-1);
  }
  return { context, ...rest, submit, finalEvent };
}

describe('a run ends naming its real cause, on a real fleet and Chromium', () => {
  const { context, waitForStatus, call, submit, finalEvent } = rig('truthful-ends');

  it('fails url_disallowed at the step whose navigate left the profile, instead of succeeding', async () => {
    const runId = await submit({
      steps: [
        { tool: 'browser.navigate', url: `${context.site.origin}/` },
        { tool: 'browser.navigate', url: 'http://elsewhere.invalid/' },
        { tool: 'browser.observe' },
      ],
      answer: 'done',
    });
    const ended = await waitForStatus(runId, ENDED);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'url_disallowed', step: 2 } });
    expect(await finalEvent(runId)).toMatchObject({
      type: 'run.failed',
      data: { error: { code: 'url_disallowed', step: 2 } },
    });
    expect(ended.error.reason).toBeUndefined();
  });

  it('fails navigation_failed with the net:: name on its step and error when the site is not there, keeping the lease', async () => {
    const port = await closedLoopbackPort();
    const refused = `http://127.0.0.1:${port}`;
    expect(
      (
        await call('POST', '/v1/profiles', {
          id: 'refusing',
          allowed_origins: [context.site.origin, refused],
        })
      ).status,
    ).toBe(201);
    const session = await call('POST', '/v1/sessions', {
      agent_id: context.agentId,
      browser_profile_id: 'refusing',
    });
    const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Follow the script',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${context.site.origin}/` },
          { tool: 'browser.navigate', url: `${refused}/` },
        ],
        answer: 'done',
      },
    });
    const runId = submitted.body.id;
    const ended = await waitForStatus(runId, ENDED);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'navigation_failed', step: 2 } });
    expect(ended.error.message).toContain('net::ERR_CONNECTION_REFUSED');
    const steps = (await call('GET', `/v1/runs/${runId}/steps`)).body.steps.filter(
      (step: { kind: string }) => step.kind === 'tool',
    );
    expect(steps.at(-1)?.tool).toMatchObject({
      outcome: { ok: false, code: 'navigation_failed' },
    });
    expect(steps.at(-1)?.tool.outcome.message).toContain('net::ERR_CONNECTION_REFUSED');
  });

  it('goes on past a refused step that says may_fail, and succeeds', async () => {
    const before = context.site.hits.get('/after') ?? 0;
    const runId = await submit({
      steps: [
        { tool: 'browser.navigate', url: 'http://elsewhere.invalid/', may_fail: true },
        { tool: 'browser.navigate', url: `${context.site.origin}/after` },
      ],
      answer: 'went on',
    });
    expect(await waitForStatus(runId, ENDED)).toMatchObject({
      status: 'succeeded',
      result: { answer: 'went on' },
      error: null,
    });
    expect(context.site.hits.get('/after')).toBe(before + 1);
  });

  it('fails element_not_found at the step naming an element the page lacks, not model_error', async () => {
    const runId = await submit({
      steps: [
        { tool: 'browser.navigate', url: `${context.site.origin}/` },
        { tool: 'browser.act', target: { role: 'link', name: 'No such link' }, action: 'click' },
      ],
      answer: 'done',
    });
    const ended = await waitForStatus(runId, ENDED);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'element_not_found', step: 2 } });
    expect(ended.error.message).toContain('No such link');
  });

  it('waits for the profile while another parked run holds it, and goes on once that run is done', async () => {
    const holder = await submit({
      steps: [
        { tool: 'browser.navigate', url: `${context.site.origin}/` },
        { tool: 'browser.act', target: { role: 'button', name: 'Pay' }, action: 'click' },
      ],
      answer: 'paid',
    });
    const parked = await waitForStatus(holder, ['parked', ...ENDED]);
    expect(parked.status).toBe('parked');

    // Runs wait their turn: not profile_unavailable, but queued with a visible reason.
    const newcomer = await submit({
      steps: [{ tool: 'browser.navigate', url: `${context.site.origin}/` }],
      answer: 'done',
    });
    const deadline = Date.now() + 20_000;
    let waiting = (await call('GET', `/v1/runs/${newcomer}`)).body;
    while (waiting.waiting_for !== 'profile' && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      waiting = (await call('GET', `/v1/runs/${newcomer}`)).body;
    }
    expect(waiting).toMatchObject({ status: 'queued', waiting_for: 'profile' });
    expect((await finalEvent(newcomer))?.type).toBe('run.waiting');

    expect((await call('POST', `/v1/runs/${holder}/cancel`, {})).status).toBeLessThan(300);
    await waitForStatus(holder, ENDED);
    expect(await waitForStatus(newcomer, ENDED)).toMatchObject({ status: 'succeeded', error: null });
  });

  it('fails page_changed when the page replaced its document while the run waited for its approval', async () => {
    const runId = await submit({
      steps: [
        { tool: 'browser.navigate', url: `${context.site.origin}/moving` },
        { tool: 'browser.act', target: { role: 'button', name: 'Pay' }, action: 'click' },
      ],
      answer: 'paid',
    });
    const parked = await waitForStatus(runId, ['parked', ...ENDED]);
    expect(parked.status).toBe('parked');
    // The page moves itself 1.5 s after it loaded; approve once it has.
    const movedBy = Date.now() + 10_000;
    while ((context.site.hits.get('/moved') ?? 0) === 0 && Date.now() < movedBy)
      await new Promise((resolve) => setTimeout(resolve, 100));
    expect(context.site.hits.get('/moved')).toBe(1);
    const approvalId = parked.pending_approvals[0].id;
    expect((await call('POST', `/v1/approvals/${approvalId}/approve`, {})).status).toBe(200);
    expect(await waitForStatus(runId, ENDED)).toMatchObject({
      status: 'failed',
      error: { code: 'page_changed', step: 2 },
    });
  });
});

describe('a run whose browser worker is gone ends provider_unavailable', () => {
  // Hand-backs a twentieth as long as the default: five of them take 1.55 s, not 31.
  const { context, waitForStatus, submit } = rig('truthful-ends-provider', { RUN_HANDBACK_BASE_MS: '50' });

  it('fails provider_unavailable at its first browser step, not model_error at a later one', async () => {
    // The data plane stops answering: every call is refused a connection.
    await context.fleet.roles.browserWorker.app.close();
    const runId = await submit({
      steps: [
        { tool: 'browser.navigate', url: `${context.site.origin}/` },
        { tool: 'browser.act', target: { role: 'button', name: 'Pay' }, action: 'click' },
      ],
      answer: 'done',
    });
    // A worker gone from reach may hand the run back a bounded number of times first (
    // outages pause): the end comes within the run's deadline either way.
    const ended = await waitForStatus(runId, ENDED, 110_000);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'provider_unavailable' } });
    // Step 1 whether the navigate's own failure ends the run or the hand-back bound ends it
    // outside the loop: the run's step index either way.
    expect(ended.error.step).toBe(1);
    expect(ended.usage).toMatchObject({ steps: 1, tool_calls: 1 });
    expect(context.site.hits.size).toBe(0);
  }, 120_000);
});
