import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const MCP_ACCEPT = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/**
 * The MCP server's runs mode at /mcp, driven by the SDK's own client over Streamable
 * HTTP against a live fleet: scripted runs click a real page whose server counts each click, so a
 * click sent without its approval would show.
 */
describe('the MCP server at /mcp in runs mode', { timeout: 60_000 }, () => {
  let fleet: FleetHandle;
  const { call } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Server;
  let origin: string;
  let base: string;
  let readOnlyKey: string;
  let approverOnlyKey: string;
  let otherKey: string;
  const clicks = new Map<string, number>();
  const clients: Client[] = [];

  beforeAll(async () => {
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      if (request.method === 'POST' && /\/click$/.test(path)) {
        clicks.set(path, (clicks.get(path) ?? 0) + 1);
        return void response.end('ok');
      }
      response.setHeader('content-type', 'text/html');
      response.end(
        `<!doctype html><title>Order</title><h1>Order</h1><button onclick="fetch('click', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Ordered</h2>'))">Order</button>`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('mcp-runs'));
    base = fleet.urls.api.replace(/\/v1$/, '');
    const key = async (scopes: Parameters<FleetHandle['store']['createApiKey']>[0]['scopes']) =>
      (await fleet.store.createApiKey({ tenant: 'dev', principal: 'dev', scopes })).key;
    readOnlyKey = await key(['runs:read']);
    approverOnlyKey = await key(['approvals:write']);
    otherKey = await key(['runs:read', 'runs:write', 'approvals:write']);
  });

  afterAll(async () => {
    // The fleet closes first, with its MCP sessions still open (their event streams too): the
    // API's close ends them, or the hook times out.
    await fleet?.close();
    for (const client of clients) await client.close().catch(() => undefined);
    await new Promise((resolve) => site?.close(resolve));
  });

  async function connect(key: string): Promise<Client> {
    const client = new Client({ name: 'mcp-runs-test', version: '1.0.0' });
    const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    });
    await client.connect(transport);
    clients.push(client);
    return client;
  }

  /** A tool's answer: its JSON text parsed, and whether it was an error. */
  // biome-ignore lint/suspicious/noExplicitAny: tool answers of many shapes, asserted field by field.
  async function tool(client: Client, name: string, args: Record<string, unknown>): Promise<any> {
    const result = await client.callTool({ name, arguments: args });
    const content = result.content as Array<{ type: string; text: string }>;
    return { isError: result.isError === true, body: JSON.parse(content[0]?.text ?? 'null') };
  }

  const order = {
    tool: 'browser.act',
    target: { role: 'button', name: 'Order' },
    action: 'click',
    postcondition: { role: 'heading', name: 'Ordered', wait_ms: 2_000 },
  };

  it('lists the runs tools, each described for a model', async () => {
    const client = await connect(fleet.apiKey);
    const { tools } = await client.listTools();
    expect(tools.map((entry) => entry.name).sort()).toEqual([
      'create_schedule',
      'decide_approval',
      'get_run',
      'list_approvals',
      'list_schedule_runs',
      'list_schedules',
      'set_schedule',
      'submit_run',
      'wait_for_run',
    ]);
    for (const entry of tools) expect(entry.description?.length).toBeGreaterThan(40);
  });

  it('submits a scripted run for a profile, in a session it creates, and waits for its success', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'mcp-read', allowed_origins: [origin] })).status).toBe(
      201,
    );
    const client = await connect(fleet.apiKey);
    const submitted = await tool(client, 'submit_run', {
      profile_id: 'mcp-read',
      input: 'Read the order page',
      script: {
        steps: [{ tool: 'browser.navigate', url: `${origin}/read/` }, { tool: 'browser.observe' }],
        answer: 'The page is Order.',
      },
      timeout_ms: 60_000,
    });
    expect(submitted.isError).toBe(false);
    expect(submitted.body).toMatchObject({ id: expect.stringMatching(/^run_/), status: 'queued' });
    const session = await call('GET', `/v1/sessions/${submitted.body.session_id}`);
    expect(session.body).toMatchObject({ browser_profile_id: 'mcp-read' });

    const waited = await tool(client, 'wait_for_run', { run_id: submitted.body.id, timeout_seconds: 45 });
    expect(waited.isError).toBe(false);
    expect(waited.body).toMatchObject({ status: 'succeeded', result: { answer: 'The page is Order.' } });
    const got = await tool(client, 'get_run', { run_id: submitted.body.id });
    expect(got.body).toMatchObject({ id: submitted.body.id, status: 'succeeded', pending_approvals: [] });
  });

  it('waits a click to its approval, lists it, approves it, and waits the run to its success', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'mcp-order', allowed_origins: [origin] })).status).toBe(
      201,
    );
    const session = await call('POST', '/v1/sessions', { browser_profile_id: 'mcp-order' });
    const client = await connect(fleet.apiKey);
    const submitted = await tool(client, 'submit_run', {
      session_id: session.body.id,
      input: 'Order once',
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/order/` }, order], answer: 'Ordered.' },
    });
    expect(submitted.isError).toBe(false);
    const runId = submitted.body.id;

    const parked = await tool(client, 'wait_for_run', { run_id: runId, timeout_seconds: 45 });
    expect(parked.body).toMatchObject({ status: 'parked', pending_approvals: [{ run_id: runId }] });
    expect(clicks.get('/order/click') ?? 0).toBe(0);
    const listed = await tool(client, 'list_approvals', { run_id: runId });
    expect(listed.body.approvals).toHaveLength(1);
    const approvalId = listed.body.approvals[0].id;
    expect(approvalId).toBe(parked.body.pending_approvals[0].id);

    const decided = await tool(client, 'decide_approval', { approval_id: approvalId, decision: 'approve' });
    expect(decided.isError).toBe(false);
    expect(decided.body).toMatchObject({ id: approvalId, status: 'approved' });
    const again = await tool(client, 'decide_approval', {
      approval_id: approvalId,
      decision: 'deny',
      reason: 'no',
    });
    expect(again).toMatchObject({ isError: true, body: { error: { code: 'conflict' } } });

    const done = await tool(client, 'wait_for_run', { run_id: runId, timeout_seconds: 45 });
    expect(done.body).toMatchObject({ status: 'succeeded', result: { answer: 'Ordered.' } });
    expect(clicks.get('/order/click')).toBe(1);
    expect((await tool(client, 'list_approvals', {})).body.approvals).toEqual([]);
  });

  it("answers REST's own errors as tool errors in the one shape", async () => {
    const client = await connect(fleet.apiKey);
    expect(await tool(client, 'get_run', { run_id: 'run_absent' })).toMatchObject({
      isError: true,
      body: { error: { code: 'not_found' } },
    });
    const neither = await tool(client, 'submit_run', { input: 'Nothing to run in' });
    expect(neither).toMatchObject({ isError: true, body: { error: { code: 'validation_failed' } } });
  });

  it("answers arguments a tool's schema refuses, and an unknown tool, in the one shape", async () => {
    const client = await connect(fleet.apiKey);
    const refused = await tool(client, 'wait_for_run', { run_id: 'run_abcd1234', timeout_seconds: 600 });
    expect(refused).toMatchObject({
      isError: true,
      body: { error: { code: 'validation_failed', message: expect.stringContaining('timeout_seconds') } },
    });
    expect(await tool(client, 'no_such_tool', {})).toMatchObject({
      isError: true,
      body: { error: { code: 'not_found' } },
    });
  });

  it('answers 401 in the one error shape to a request without a key, at both MCP doors', async () => {
    for (const path of ['/mcp', '/mcp/browser/ses_absent']) {
      const answer = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: MCP_ACCEPT,
        body: JSON.stringify(INITIALIZE),
      });
      expect(answer.status).toBe(401);
      expect(await answer.json()).toMatchObject({ error: { code: 'unauthorized' } });
    }
  });

  it('refuses a key without runs:read at the door, and one without runs:write the submission', async () => {
    await expect(connect(approverOnlyKey)).rejects.toThrow(/401|runs:read/);
    const reader = await connect(readOnlyKey);
    expect((await tool(reader, 'list_approvals', {})).isError).toBe(false);
    const refused = await tool(reader, 'submit_run', { session_id: 'ses_anything', input: 'Try' });
    expect(refused).toMatchObject({
      isError: true,
      body: { error: { code: 'unauthorized', message: expect.stringContaining('runs:write') } },
    });
  });

  it('answers 404 to another key presenting a session id it did not open', async () => {
    const owner = await connect(fleet.apiKey);
    const sessionId = (owner.transport as StreamableHTTPClientTransport).sessionId;
    expect(sessionId).toBeTruthy();
    const list = { jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} };
    const stolen = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        ...MCP_ACCEPT,
        authorization: `Bearer ${otherKey}`,
        'mcp-session-id': sessionId ?? '',
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify(list),
    });
    expect(stolen.status).toBe(404);
    expect(await stolen.json()).toMatchObject({ error: { code: 'not_found' } });
    // The owner's session is untouched.
    expect((await owner.listTools()).tools).toHaveLength(9);
  });

  it('ends a session on DELETE, after which its id answers 404', async () => {
    const client = await connect(fleet.apiKey);
    const transport = client.transport as StreamableHTTPClientTransport;
    const sessionId = transport.sessionId ?? '';
    await transport.terminateSession();
    const after = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: {
        ...MCP_ACCEPT,
        authorization: `Bearer ${fleet.apiKey}`,
        'mcp-session-id': sessionId,
        'mcp-protocol-version': '2025-06-18',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }),
    });
    expect(after.status).toBe(404);
    expect(await after.json()).toMatchObject({ error: { code: 'not_found' } });
  });

  it('refuses a request without a session id that is not an initialize, in the one shape', async () => {
    const answer = await fetch(`${base}/mcp`, {
      method: 'POST',
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${fleet.apiKey}` },
      body: JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/list', params: {} }),
    });
    expect(answer.status).toBe(400);
    expect(await answer.json()).toMatchObject({ error: { code: 'bad_request' } });
  });

  it('answers the browser mode route behind the key, in the one shape', async () => {
    const answer = await fetch(`${base}/mcp/browser/ses_absent`, {
      method: 'POST',
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${fleet.apiKey}` },
      body: JSON.stringify(INITIALIZE),
    });
    expect(answer.status).not.toBe(401);
    const body = await answer.json();
    expect(body.error.code).toEqual(expect.any(String));
    expect(body.error.message).not.toMatch(/no route/);
  });
});
