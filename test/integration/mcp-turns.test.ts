import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpClientModel } from '../../libs/models/mcp-model.js';
import { ModelCancelled, type ModelRequest, type TranscriptEntry } from '../../libs/runtime/model.js';
import { MCP_TURN_KEY_TTL_MS, McpTurns } from '../../libs/store/mcp-turns.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * The MCP browser mode's channel between the API and the run worker, on a real Redis:
 * the calls the client makes, the call a worker took (taken again after a crash), and each call's
 * result; and the model over it, which answers one call per turn and ends an idle client's run.
 */
describe('the MCP browser mode channel on the run keys', () => {
  const prefix = uniquePrefix('mcp-turns');
  let redis: Redis;
  let turns: McpTurns;
  let blocking: Awaited<ReturnType<McpTurns['blocking']>>;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'producer', 'test-mcp-turns');
    turns = new McpTurns(redis, `${prefix}:`);
    blocking = await turns.blocking();
  });

  afterAll(async () => {
    blocking.disconnect();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  const observe = (id: string) => ({ id, tool: 'observe' as const, args: {} });
  const noTranscript: TranscriptEntry[] = [{ kind: 'input', text: 'driven' }];
  const request = (transcript: TranscriptEntry[]): ModelRequest => ({ transcript, tools: [] });

  it('takes a call again while the transcript lacks its turn, and drops it once the turn is recorded', async () => {
    await turns.pushCall('run_a', observe('mcp_first0001'));
    await turns.pushCall('run_a', observe('mcp_second001'));
    // The channel's keys expire on their own, past the longest run deadline.
    expect(await redis.pttl(`${prefix}:{run:run_a}:mcp:calls`)).toBeGreaterThan(MCP_TURN_KEY_TTL_MS - 60_000);
    expect((await turns.takeCall('run_a', new Set(), blocking, 100))?.id).toBe('mcp_first0001');
    // A worker that crashed before recording the turn takes the same call, not the next one.
    expect((await turns.takeCall('run_a', new Set(), blocking, 100))?.id).toBe('mcp_first0001');
    expect((await turns.takeCall('run_a', new Set(['mcp_first0001']), blocking, 100))?.id).toBe(
      'mcp_second001',
    );
    expect(
      await turns.takeCall('run_a', new Set(['mcp_first0001', 'mcp_second001']), blocking, 100),
    ).toBeUndefined();
  });

  it('hands each published result to the API once, a re-publication after a crash included', async () => {
    const result = {
      call_id: 'mcp_result0001',
      tool: 'browser.observe',
      outcome: { ok: true as const, result: { n: 1 } },
    };
    await turns.publishResults('run_b', [result]);
    await turns.publishResults('run_b', [result]);
    expect(await turns.takeResult('run_b', 'mcp_result0001', blocking, 500)).toEqual(result);
    expect(await turns.takeResult('run_b', 'mcp_unknown001', blocking, 0)).toBeUndefined();
    expect(await redis.pttl(`${prefix}:{run:run_b}:mcp:result:mcp_result0001`)).toBeGreaterThan(0);
  });

  it('answers a call as one tool call at zero tokens, after publishing the previous turn outcomes', async () => {
    const model = new McpClientModel({
      runId: 'run_c',
      turns,
      idleTimeoutMs: 5_000,
      stopRequested: async () => false,
    });
    const transcript: TranscriptEntry[] = [
      ...noTranscript,
      {
        kind: 'model',
        toolCalls: [{ id: 'mcp_earlier001', name: 'browser.navigate', args: { url: 'http://a/' } }],
      },
      {
        kind: 'tool',
        callId: 'mcp_earlier001',
        name: 'browser.navigate',
        outcome: { ok: false, code: 'url_disallowed', message: 'no' },
      },
    ];
    await turns.pushCall('run_c', {
      id: 'mcp_next000001',
      tool: 'act',
      args: { revision: 'r', element: 'e1', action: 'click' },
    });
    const response = await model.call(request(transcript), { deadlineMs: Date.now() + 10_000 });
    expect(response).toEqual({
      toolCalls: [
        {
          id: 'mcp_next000001',
          name: 'browser.act',
          args: { revision: 'r', element: 'e1', action: 'click' },
        },
      ],
      usage: { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 },
    });
    expect(await turns.takeResult('run_c', 'mcp_earlier001', blocking, 0)).toMatchObject({
      outcome: { ok: false, code: 'url_disallowed' },
    });

    await turns.pushCall('run_c', { id: 'mcp_finish0001', tool: 'finish', args: { answer: 'Done.' } });
    const recorded: TranscriptEntry[] = [...transcript, { kind: 'model', toolCalls: response.toolCalls }];
    expect(await model.call(request(recorded), { deadlineMs: Date.now() + 10_000 })).toMatchObject({
      toolCalls: [],
      answer: 'Done.',
    });
  });

  it('ends the turn cancelled, naming the idle time, when the client makes no call in time', async () => {
    const model = new McpClientModel({
      runId: 'run_d',
      turns,
      idleTimeoutMs: 300,
      stopRequested: async () => false,
    });
    const startedAtMs = Date.now();
    const error = await model
      .call(request(noTranscript), { deadlineMs: Date.now() + 10_000 })
      .catch((e) => e);
    expect(error).toBeInstanceOf(ModelCancelled);
    expect(error).toMatchObject({
      code: 'cancelled',
      message: expect.stringContaining('300 ms (MCP_IDLE_TIMEOUT_MS)'),
    });
    expect(Date.now() - startedAtMs).toBeGreaterThanOrEqual(300);
  });

  it('stops waiting once the run must stop (a cancel asked over REST)', async () => {
    let stop = false;
    const model = new McpClientModel({
      runId: 'run_e',
      turns,
      idleTimeoutMs: 60_000,
      stopRequested: async () => stop,
    });
    setTimeout(() => {
      stop = true;
    }, 200);
    const startedAtMs = Date.now();
    await expect(
      model.call(request(noTranscript), { deadlineMs: Date.now() + 60_000 }),
    ).rejects.toBeInstanceOf(ModelCancelled);
    expect(Date.now() - startedAtMs).toBeLessThan(5_000);
  });
});
