import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, nestedJson, startApiRig } from './api-rig.js';

const MCP_ACCEPT = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

/**
 * Two small findings on the API: `/mcp` took JSON-RPC nested 3,000 levels deep on an open session
 * (a 200 carrying the SDK's whole validation report), and `/ui/pages.js` went without `nosniff`.
 */
describe('API hardening', { timeout: 60_000 }, () => {
  let rig: ApiRig;
  let key: string;
  let sessionId: string;

  beforeAll(async () => {
    rig = await startApiRig('hardening');
    key = await rig.key('hard', 'h', ['runs:read']);
    const opened = await fetch(`${rig.api.url}/mcp`, {
      method: 'POST',
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${key}` },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'h', version: '1' } },
      }),
    });
    await opened.text();
    sessionId = opened.headers.get('mcp-session-id') as string;
    expect(sessionId).toBeTruthy();
  });

  afterAll(async () => {
    await rig?.close();
  });

  async function mcpCall(body: string) {
    const response = await fetch(`${rig.api.url}/mcp`, {
      method: 'POST',
      headers: { ...MCP_ACCEPT, authorization: `Bearer ${key}`, 'mcp-session-id': sessionId },
      body,
    });
    return { status: response.status, text: await response.text() };
  }

  it.each([
    ['3,000 levels in the arguments', 3_000],
    ['just past the REST bound', 33],
  ])(
    'refuses a JSON-RPC message nested %s on an open MCP session, 4xx in the REST shape',
    async (_what, depth) => {
      const answer = await mcpCall(
        `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_run","arguments":{"run_id":${nestedJson(depth)}}}}`,
      );
      expect(answer.status).toBe(422);
      expect(JSON.parse(answer.text)).toEqual({
        error: {
          code: 'validation_failed',
          message: expect.stringMatching(/^body: nested deeper than \d+ levels$/),
        },
      });
      expect(answer.text.length).toBeLessThan(200);
    },
  );

  it('still answers a message whose arguments nest as deeply as a REST field may', async () => {
    const answer = await mcpCall(
      `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"get_run","arguments":{"run_id":${nestedJson(31)}}}}`,
    );
    // The MCP answer (a tool error: run_id is no string), not the REST refusal.
    expect(answer.status).toBe(200);
    expect(answer.text).toMatch(/^event: message\ndata: \{"result"/);
  });

  it.each(['/ui/pages.js', '/ui/pages.css', '/docs/static/index.html', '/docs/json', '/healthz'])(
    'serves %s with X-Content-Type-Options: nosniff',
    async (path) => {
      const response = await fetch(`${rig.api.url}${path}`);
      await response.arrayBuffer();
      expect(response.status).toBe(200);
      expect(response.headers.get('x-content-type-options')).toBe('nosniff');
    },
  );
});
