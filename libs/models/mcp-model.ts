import type { McpTurnCall, McpTurnResult } from '../contracts/index.js';
import {
  type Model,
  type ModelCallLimits,
  ModelCancelled,
  ModelError,
  type ModelRequest,
  type ModelResponse,
  type TranscriptEntry,
} from '../runtime/index.js';
import type { McpTurns } from '../store/mcp-turns.js';

/** The most one blocking read waits: the cancel flag and the shutdown signal are looked at between reads. */
export const MCP_WAIT_SLICE_MS = 1_000;

const NO_TOKENS = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };

export interface McpClientModelOptions {
  runId: string;
  turns: McpTurns;
  /** How long the client may go without a call before the run ends `cancelled` (MCP_IDLE_TIMEOUT_MS). */
  idleTimeoutMs: number;
  /** Whether the run must stop (a cancel asked, or ended elsewhere): read between waits. */
  stopRequested: () => Promise<boolean>;
  clock?: () => number;
}

/**
 * MCP browser mode: the model is the MCP client. Each call of the loop is one turn: it
 * first publishes what the previous turn's tool calls gave (the transcript's last `tool` entries)
 * to the API, which answers the client with them, then waits for the client's next call and
 * answers it as one tool call — or, for `finish`, as the run's answer. It costs nothing and uses
 * no tokens (the client pays its own model); its turns and tool calls count against the run's
 * limits as any model's do. A client silent past the idle time ends the run `cancelled`.
 */
export class McpClientModel implements Model {
  readonly name = 'mcp-client';

  constructor(private readonly options: McpClientModelOptions) {}

  async call(request: ModelRequest, limits: ModelCallLimits): Promise<ModelResponse> {
    const { runId, turns, idleTimeoutMs, stopRequested } = this.options;
    const clock = this.options.clock ?? Date.now;
    await turns.publishResults(runId, lastTurnResults(request.transcript));
    const idleAtMs = clock() + idleTimeoutMs;
    const connection = await turns.blocking();
    try {
      for (;;) {
        if (limits.signal?.aborted) throw new ModelError('the execution was interrupted');
        if (await stopRequested())
          throw new ModelCancelled('the run was cancelled while it waited for its MCP client');
        const nowMs = clock();
        if (nowMs >= limits.deadlineMs)
          throw new ModelError('the run passed its deadline waiting for its MCP client');
        if (nowMs >= idleAtMs) throw new ModelCancelled(idleMessage(idleTimeoutMs));
        const waitMs = Math.min(MCP_WAIT_SLICE_MS, idleAtMs - nowMs, limits.deadlineMs - nowMs);
        const call = await turns.takeCall(runId, recordedCallIds(request.transcript), connection, waitMs);
        if (call) return responseFor(call);
      }
    } finally {
      connection.disconnect();
    }
  }
}

/** The run's end message when its client went quiet: it names the idle time and its setting. */
export function idleMessage(idleTimeoutMs: number): string {
  return `the MCP client made no call for ${idleTimeoutMs} ms (MCP_IDLE_TIMEOUT_MS); the run is cancelled`;
}

/** One client call as the model's turn: a browser tool call under its contract name, or the answer. */
export function responseFor(call: McpTurnCall): ModelResponse {
  if (call.tool === 'finish') {
    const answer = typeof call.args.answer === 'string' ? call.args.answer : '';
    return { toolCalls: [], answer, usage: NO_TOKENS };
  }
  return { toolCalls: [{ id: call.id, name: `browser.${call.tool}`, args: call.args }], usage: NO_TOKENS };
}

/** The outcomes the transcript holds for its last model turn's calls, as the API reads them. */
export function lastTurnResults(transcript: readonly TranscriptEntry[]): McpTurnResult[] {
  const results: McpTurnResult[] = [];
  for (let index = transcript.length - 1; index >= 0; index -= 1) {
    const entry = transcript[index];
    if (entry?.kind === 'model') break;
    if (entry?.kind === 'tool')
      results.unshift({ call_id: entry.callId, tool: entry.name, outcome: entry.outcome });
  }
  return results;
}

/** The ids of every call the transcript's model turns recorded. */
function recordedCallIds(transcript: readonly TranscriptEntry[]): Set<string> {
  return new Set(
    transcript.flatMap((entry) => (entry.kind === 'model' ? entry.toolCalls.map((call) => call.id) : [])),
  );
}
