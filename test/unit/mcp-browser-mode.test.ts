import { describe, expect, it } from 'vitest';
import { endAnswer, outcomeAnswer, waitsAnswer } from '../../apps/api/mcp/browser-mode-answers.js';
import { mcpDriverKeyOf, mcpTurnCallSchema, type RunView } from '../../libs/contracts/index.js';
import { idleMessage, lastTurnResults, responseFor } from '../../libs/models/mcp-model.js';
import type { TranscriptEntry } from '../../libs/runtime/model.js';

/** MCP browser mode: the pure rules of a run whose model is an MCP client. */
describe('MCP browser mode rules', () => {
  it('makes each client call one turn: one browser tool call, or the answer for finish, at zero tokens', () => {
    expect(responseFor({ id: 'mcp_aaaaaaaa', tool: 'navigate', args: { url: 'http://a/' } })).toEqual({
      toolCalls: [{ id: 'mcp_aaaaaaaa', name: 'browser.navigate', args: { url: 'http://a/' } }],
      usage: { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 },
    });
    expect(responseFor({ id: 'mcp_bbbbbbbb', tool: 'finish', args: { answer: 'Done.' } })).toMatchObject({
      toolCalls: [],
      answer: 'Done.',
    });
  });

  it('publishes only the outcomes of the last model turn, in order', () => {
    const ok = { ok: true as const, result: 1 };
    const transcript: TranscriptEntry[] = [
      { kind: 'input', text: 'go' },
      { kind: 'model', toolCalls: [{ id: 'c1', name: 'browser.observe', args: {} }] },
      { kind: 'tool', callId: 'c1', name: 'browser.observe', outcome: ok },
      { kind: 'model', toolCalls: [{ id: 'c2', name: 'browser.act', args: {} }] },
      {
        kind: 'tool',
        callId: 'c2',
        name: 'browser.act',
        outcome: { ok: false, code: 'page_changed', message: 'm' },
      },
    ];
    expect(lastTurnResults(transcript).map((result) => result.call_id)).toEqual(['c2']);
    expect(lastTurnResults(transcript.slice(0, 4))).toEqual([]);
  });

  it('knows a run driven over MCP and its driving key from its input, and no other run', () => {
    expect(mcpDriverKeyOf({ input: { text: 't', driver: 'mcp', driver_key_id: 'key_0a1b2c3d' } })).toBe(
      'key_0a1b2c3d',
    );
    expect(mcpDriverKeyOf({ input: { text: 't' } })).toBeUndefined();
    expect(mcpDriverKeyOf({ input: 'text' })).toBeUndefined();
  });

  it('refuses a call record the API did not write', () => {
    expect(mcpTurnCallSchema.safeParse({ id: 'x', tool: 'observe', args: {} }).success).toBe(false);
    expect(mcpTurnCallSchema.safeParse({ id: 'mcp_aaaaaaaa', tool: 'delete', args: {} }).success).toBe(false);
  });

  it('names the idle time and its setting in the cancelled run message', () => {
    expect(idleMessage(300_000)).toContain('300000 ms (MCP_IDLE_TIMEOUT_MS)');
  });

  it('answers a tool failure and a failed run with isError, a result, a wait and a success without', () => {
    const refused = outcomeAnswer({
      call_id: 'c',
      tool: 'browser.navigate',
      outcome: { ok: false, code: 'url_disallowed', message: 'outside the profile' },
    });
    expect(refused.isError).toBe(true);
    expect(JSON.parse((refused.content[0] as { text: string }).text)).toEqual({
      error: { code: 'url_disallowed', message: 'outside the profile' },
    });
    expect(
      outcomeAnswer({ call_id: 'c', tool: 't', outcome: { ok: true, result: {} } }).isError,
    ).toBeUndefined();
    expect(waitsAnswer('apr_1').isError).toBeUndefined();
    const run = (fields: Partial<RunView>) => ({ id: 'run_1', ...fields }) as RunView;
    const failed = run({ status: 'failed', error: { code: 'budget_exceeded', message: 'm', step: 3 } });
    expect(endAnswer(failed)).toMatchObject({ isError: true });
    expect(
      endAnswer(run({ status: 'succeeded', error: null, result: { answer: 'a' } })).isError,
    ).toBeUndefined();
  });
});
