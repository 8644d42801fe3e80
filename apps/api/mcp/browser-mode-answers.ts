import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { McpTurnResult, RunView } from '../../../libs/contracts/index.js';

/**
 * MCP browser mode: how the run's turns are told to the MCP client. Pure: the tool
 * results the client's model reads, built from what the run's worker published and the run's view.
 */

type Content = CallToolResult['content'];

const text = (value: string): Content[number] => ({ type: 'text', text: value });

/** A tool call's outcome: its result (the observation…), or its error with `isError`. */
export function outcomeAnswer(result: McpTurnResult, earlier: Content = []): CallToolResult {
  const { outcome } = result;
  if (outcome.ok) return { content: [...earlier, text(JSON.stringify(outcome.result))] };
  return {
    content: [...earlier, text(JSON.stringify({ error: { code: outcome.code, message: outcome.message } }))],
    isError: true,
  };
}

/**
 * An act parked on its approval: the answer comes at once, with the approval's id. It is decided
 * elsewhere (REST, the run page, the CLI), never by the key driving this run; a later call's
 * answer begins with the act's outcome once it is decided.
 */
export function waitsAnswer(approvalId: string, earlier: Content = []): CallToolResult {
  return {
    content: [
      ...earlier,
      text(
        JSON.stringify({
          status: 'waiting_approval',
          approval_id: approvalId,
          message: `this act waits for approval ${approvalId}; it is decided over REST (POST /v1/approvals/${approvalId}/approve or /deny), the run page or the CLI, by a key other than the one driving this run. Call observe later: its answer begins with this act's outcome once it is decided.`,
        }),
      ),
    ],
  };
}

/** The run ended: `succeeded` with its answer (what `finish` gave), else its status and error with `isError`. */
export function endAnswer(run: RunView, earlier: Content = []): CallToolResult {
  if (run.status === 'succeeded')
    return {
      content: [...earlier, text(JSON.stringify({ run_id: run.id, status: run.status, result: run.result }))],
    };
  return {
    content: [
      ...earlier,
      text(
        JSON.stringify({
          run_id: run.id,
          status: run.status,
          error: run.error ? { code: run.error.code, message: run.error.message } : null,
        }),
      ),
    ],
    isError: true,
  };
}

/** An earlier call answered "waits", now decided: its outcome, to go before the next answer. */
export function earlierOutcome(result: McpTurnResult, approvalId: string): Content[number] {
  const { outcome } = result;
  return text(
    JSON.stringify({
      earlier_call: { tool: result.tool, approval_id: approvalId },
      ...(outcome.ok
        ? { result: outcome.result }
        : { error: { code: outcome.code, message: outcome.message } }),
    }),
  );
}

/** The client stopped waiting (its request was cancelled): the call may still run; its outcome is not told. */
export function abandonedAnswer(): CallToolResult {
  return {
    content: [
      text(JSON.stringify({ error: { code: 'cancelled', message: 'the client cancelled this call' } })),
    ],
    isError: true,
  };
}
