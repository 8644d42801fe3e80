import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { BOUND_TOOL_DEFINITIONS } from '../../libs/runtime/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { connectRedis } from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** Short, so the idle test ends in seconds; every other test calls well inside it. */
const IDLE_MS = 6_000;

/**
 * MCP browser mode at /mcp/browser/<session_id>: the SDK's own client is the run's
 * model, against a live fleet and a real page whose server counts every click and page load, so
 * a click sent without its approval, or a navigation the origin fence let through, would show.
 */
describe('the MCP browser mode: the MCP client is the run model', { timeout: 90_000 }, () => {
  let fleet: FleetHandle;
  const prefix = uniquePrefix('mcp-browser');
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Server;
  let origin: string;
  let base: string;
  /** The key that drives the runs over MCP: it may write runs and approvals, yet decides none of its own. */
  let drivingKey: string;
  /** Requests the page's server received, by method and path. */
  const hits = new Map<string, number>();
  const clients: Client[] = [];

  beforeAll(async () => {
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      hits.set(`${request.method} ${path}`, (hits.get(`${request.method} ${path}`) ?? 0) + 1);
      if (request.method === 'POST') return void response.end('ok');
      response.setHeader('content-type', 'text/html');
      response.end(
        `<!doctype html><title>Form</title><h1>Form</h1>${['Save', 'Send']
          .map(
            (name) =>
              `<button onclick="fetch('${name.toLowerCase()}', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>${name}d</h2>'))">${name}</button>`,
          )
          .join('')}`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(prefix, { MCP_IDLE_TIMEOUT_MS: String(IDLE_MS) });
    base = fleet.urls.api.replace(/\/v1$/, '');
    drivingKey = (
      await fleet.store.createApiKey({
        tenant: 'dev',
        principal: 'dev',
        scopes: ['runs:read', 'runs:write', 'approvals:write'],
      })
    ).key;
  });

  afterAll(async () => {
    await Promise.allSettled(clients.map((client) => client.close()));
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  /** A session bound to a new profile `name` allowing the page's origin, of an agent with `limits`. */
  async function boundSession(name: string, limits: Record<string, number> = {}): Promise<string> {
    expect((await call('POST', '/v1/profiles', { id: name, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Driven over MCP.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
      limits,
    });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id, browser_profile_id: name });
    expect(session.status).toBe(201);
    return session.body.id;
  }

  /** The SDK's client in browser mode on `sessionId`, and the run its opening started. */
  async function open(sessionId: string): Promise<{ client: Client; runId: string }> {
    const client = new Client({ name: 'mcp-browser-test', version: '1.0.0' });
    clients.push(client);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${base}/mcp/browser/${sessionId}`), {
        requestInit: { headers: { authorization: `Bearer ${drivingKey}` } },
      }),
    );
    const runId = /run (run_\w+)/.exec(client.getInstructions() ?? '')?.[1];
    expect(runId).toBeDefined();
    return { client, runId: runId as string };
  }

  /** A tool's answer: its content's JSON texts, and whether it is an error. */
  async function tool(client: Client, name: string, args: Record<string, unknown> = {}) {
    const answer = (await client.callTool({ name, arguments: args })) as CallToolResult;
    const texts = answer.content.map((item) => (item.type === 'text' ? JSON.parse(item.text) : item));
    return { isError: answer.isError === true, texts, last: texts.at(-1) };
  }

  /** The reference of the visible element `role` named `name` in an observation. */
  function refOf(
    observation: { elements: Array<{ ref: string; role: string; name: string }> },
    name: string,
  ) {
    const element = observation.elements.find((candidate) => candidate.name === name);
    expect(element, `a visible ${name}`).toBeDefined();
    return element?.ref as string;
  }

  async function liveLease(profileId: string) {
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-lease-read');
    try {
      const leases = new RedisLeaseStore(redis, `${prefix}:`);
      const leaseId = await leases.liveLeaseId({ tenant: 'dev', id: profileId });
      return leaseId ? leases.getLease({ tenant: 'dev', id: profileId }, leaseId) : undefined;
    } finally {
      redis.disconnect();
    }
  }

  /** The run's MCP call keys still in Redis (its calls not taken, its call last taken). */
  async function keysLeft(runId: string): Promise<string[]> {
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-mcp-keys');
    try {
      const keys = [`${prefix}:{run:${runId}}:mcp:calls`, `${prefix}:{run:${runId}}:mcp:taken`];
      const exists = await Promise.all(keys.map((key) => redis.exists(key)));
      return keys.filter((_, index) => exists[index] === 1);
    } finally {
      redis.disconnect();
    }
  }

  it('lists navigate, observe, act and request_person with the browser tools contract, and finish', async () => {
    const { client } = await open(await boundSession('tools'));
    const { tools } = await client.listTools();
    expect(tools.map((listed) => listed.name).sort()).toEqual([
      'act',
      'finish',
      'navigate',
      'observe',
      'request_person',
    ]);
    for (const name of ['navigate', 'observe', 'act', 'request_person']) {
      const listed = tools.find((candidate) => candidate.name === name);
      const contract = BOUND_TOOL_DEFINITIONS.find((definition) => definition.name === `browser.${name}`);
      expect(listed?.description).toBe(contract?.description);
      expect(Object.keys(listed?.inputSchema.properties ?? {}).sort()).toEqual(
        Object.keys((contract?.parameters.properties as object) ?? {}).sort(),
      );
    }
    expect(tools.find((listed) => listed.name === 'finish')?.inputSchema.required).toEqual(['answer']);
  });

  it('works a page to a postcondition through an approval another key grants, and finishes', async () => {
    const { client, runId } = await open(await boundSession('work'));
    const page = `${origin}/work/`;
    const navigated = await tool(client, 'navigate', { url: page });
    expect(navigated.isError).toBe(false);
    expect(navigated.last.observation.url).toBe(page);
    const observed = await tool(client, 'observe');
    const { revision } = observed.last.observation;

    // The act needs the owner's approval: the answer comes at once, with the approval's id.
    const save = {
      revision,
      element: refOf(observed.last.observation, 'Save'),
      action: 'click',
      postcondition: { role: 'heading', name: 'Saved', wait_ms: 2_000 },
    };
    const waits = await tool(client, 'act', save);
    expect(waits.isError).toBe(false);
    expect(waits.last).toMatchObject({
      status: 'waiting_approval',
      approval_id: expect.stringMatching(/^apr_/),
    });
    const approvalId = waits.last.approval_id;
    expect((await waitForStatus(runId, ['parked'])).pending_approvals[0].id).toBe(approvalId);
    expect(hits.get('POST /work/save') ?? 0).toBe(0);

    // Never by the key that drives the run; another key grants it, with a grant for the next act.
    const refused = await call('POST', `/v1/approvals/${approvalId}/approve`, {}, { key: drivingKey });
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'forbidden', message: expect.stringContaining('MCP') });
    const denied = await call(
      'POST',
      `/v1/approvals/${approvalId}/deny`,
      { reason: 'no' },
      { key: drivingKey },
    );
    expect(denied.status).toBe(403);
    const approved = await call('POST', `/v1/approvals/${approvalId}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 1 },
    });
    expect(approved.status).toBe(200);

    // A later call's answer begins with the approved act's outcome: its postcondition held.
    const after = await tool(client, 'observe');
    expect(after.isError).toBe(false);
    expect(after.texts[0]).toMatchObject({
      earlier_call: { tool: 'browser.act', approval_id: approvalId },
      result: { observation: { condition: { result: 'satisfied' } } },
    });
    expect(hits.get('POST /work/save')).toBe(1);

    // The grant covers the next act: answered with its result straight away.
    const send = await tool(client, 'act', {
      revision: after.last.observation.revision,
      element: refOf(after.last.observation, 'Send'),
      action: 'click',
      postcondition: { role: 'heading', name: 'Sendd', wait_ms: 2_000 },
    });
    expect(send.isError).toBe(false);
    expect(send.last.observation.condition.result).toBe('satisfied');
    expect(hits.get('POST /work/send')).toBe(1);

    const finished = await tool(client, 'finish', { answer: 'Saved and sent.' });
    expect(finished).toMatchObject({
      isError: false,
      last: { status: 'succeeded', result: { answer: 'Saved and sent.' } },
    });
    const run = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled']);
    expect(run).toMatchObject({ status: 'succeeded', usage: { model_calls: 6, tool_calls: 5 } });
    expect(run.usage.cost_micro_usd).toBe(0);

    const steps = await call('GET', `/v1/runs/${runId}/steps`);
    const tools = steps.body.steps.filter((step: { kind: string }) => step.kind === 'tool');
    expect(tools.map((step: { tool: { name: string } }) => step.tool.name)).toEqual([
      'browser.navigate',
      'browser.observe',
      'browser.act',
      'browser.observe',
      'browser.act',
    ]);
    expect(await liveLease('work')).toBeUndefined();
  });

  it('refuses a navigation outside the profile origins and leaves the page as it was', async () => {
    const { client, runId } = await open(await boundSession('fence'));
    const page = `${origin}/fence/`;
    await tool(client, 'navigate', { url: page });
    const outside = origin.replace('127.0.0.1', 'localhost');
    const refused = await tool(client, 'navigate', { url: `${outside}/elsewhere/` });
    expect(refused.isError).toBe(true);
    expect(refused.last.error.code).toBe('url_disallowed');
    expect(hits.get('GET /elsewhere/') ?? 0).toBe(0);
    const observed = await tool(client, 'observe');
    expect(observed.last.observation.url).toBe(page);
    // The refusal is the call's result: the run goes on, as with any model.
    expect((await call('GET', `/v1/runs/${runId}`)).body.status).toBe('running');
    await tool(client, 'finish', { answer: 'Fenced.' });
  });

  it('stops at the run budget: failed budget_exceeded, told to the client as the run end', async () => {
    // Five model calls with two kept for the answer: two turns may call tools, the third may not.
    const { client, runId } = await open(await boundSession('budget', { max_model_calls: 5 }));
    expect((await tool(client, 'navigate', { url: `${origin}/budget/` })).isError).toBe(false);
    expect((await tool(client, 'observe')).isError).toBe(false);
    const stopped = await tool(client, 'observe');
    expect(stopped.isError).toBe(true);
    expect(stopped.last).toMatchObject({
      run_id: runId,
      status: 'failed',
      error: { code: 'budget_exceeded' },
    });
    expect(await waitForStatus(runId, ['failed'])).toMatchObject({ error: { code: 'budget_exceeded' } });
    // Every later call is told the same end.
    expect((await tool(client, 'observe')).last).toMatchObject({ status: 'failed' });
    // The call the run never took is dropped with its end, not left to its key's expiry.
    expect(await keysLeft(runId)).toEqual([]);
  });

  it('cancels the run of a client idle past MCP_IDLE_TIMEOUT_MS and releases its lease', async () => {
    const { client, runId } = await open(await boundSession('idle'));
    await tool(client, 'navigate', { url: `${origin}/idle/` });
    expect(await liveLease('idle')).toMatchObject({ state: 'live' });
    const run = await waitForStatus(runId, ['cancelled', 'failed', 'succeeded'], IDLE_MS + 20_000);
    expect(run).toMatchObject({
      status: 'cancelled',
      error: { code: 'cancelled', message: expect.stringContaining(`${IDLE_MS} ms (MCP_IDLE_TIMEOUT_MS)`) },
    });
    expect(
      await eventually(
        () => liveLease('idle'),
        (lease) => lease === undefined,
        10_000,
      ),
    ).toBeUndefined();
    const late = await tool(client, 'observe');
    expect(late).toMatchObject({ isError: true, last: { status: 'cancelled' } });
  });
});
