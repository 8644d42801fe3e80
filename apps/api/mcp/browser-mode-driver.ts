import { randomBytes } from 'node:crypto';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { type McpBrowserTool, type RunView, runHasEnded } from '../../../libs/contracts/index.js';
import type { RunStore } from '../../../libs/store/index.js';
import type { McpTurns } from '../../../libs/store/mcp-turns.js';
import type { RedisClient } from '../../../libs/store/redis-client.js';
import {
  abandonedAnswer,
  earlierOutcome,
  endAnswer,
  outcomeAnswer,
  waitsAnswer,
} from './browser-mode-answers.js';

/** The most one blocking read of a result waits before the run's status is looked at again. */
export const RESULT_WAIT_SLICE_MS = 500;

type Content = CallToolResult['content'];

/**
 * The API side of one MCP browser mode: each client call is pushed to the run's worker (whose
 * model it is) and answered with what the run made of it — its result, a wait on its approval, or
 * the run's end. Calls answered "waits" are remembered, and their outcome goes before the answer
 * of a later call once the worker has published it.
 */
export class BrowserModeDriver {
  /** Calls answered "waits", by call id: their approval's id. */
  readonly #awaiting = new Map<string, string>();
  #connection: Promise<RedisClient> | undefined;
  #closed = false;

  constructor(
    private readonly turns: McpTurns,
    private readonly store: Pick<RunStore, 'getRun' | 'listPendingApprovals'>,
    private readonly run: { id: string; tenant: string },
  ) {}

  /** One client call: the run's answer to it. */
  async call(
    tool: McpBrowserTool,
    args: Record<string, unknown>,
    signal?: AbortSignal,
  ): Promise<CallToolResult> {
    const { id: runId, tenant } = this.run;
    const before = await this.#earlier();
    const now = await this.#view();
    if (runHasEnded(now.status)) return this.#ended(now, [...before, ...(await this.#earlier())]);
    // A run parked on an earlier act takes no call until its approval is decided: it is told again.
    if (now.status === 'parked') {
      const pending = await this.store.listPendingApprovals(tenant, runId);
      if (pending[0]) return waitsAnswer(pending[0].id, before);
    }
    const callId = `mcp_${randomBytes(12).toString('base64url')}`;
    await this.turns.pushCall(runId, { id: callId, tool, args });
    const connection = await this.#blocking();
    for (;;) {
      if (this.#closed || signal?.aborted) return abandonedAnswer();
      const result = await this.turns.takeResult(runId, callId, connection, RESULT_WAIT_SLICE_MS);
      if (result) return outcomeAnswer(result, [...before, ...(await this.#earlier())]);
      const view = await this.#view();
      if (runHasEnded(view.status)) {
        // The last outcome may have been published just before the end.
        const last = await this.turns.takeResult(runId, callId, connection, 0);
        const earlier = [...before, ...(await this.#earlier())];
        await this.turns.forget(runId);
        return last ? outcomeAnswer(last, earlier) : endAnswer(view, earlier);
      }
      if (view.status === 'parked') {
        // Parked since this call was pushed: on this call's own act (the client's calls are turns).
        const pending = await this.store.listPendingApprovals(tenant, runId);
        const approval = pending[0];
        if (approval) {
          this.#awaiting.set(callId, approval.id);
          return waitsAnswer(approval.id, before);
        }
      }
    }
  }

  /** Ends the driver's blocking reads; the run is left to its idle timeout. Idempotent. */
  close(): void {
    this.#closed = true;
    void this.#connection?.then(
      (connection) => connection.disconnect(),
      () => undefined,
    );
    this.#connection = undefined;
  }

  /** The run's end, told; what is left of its calls is dropped (their arguments may hold a secret). */
  async #ended(view: RunView, earlier: Content): Promise<CallToolResult> {
    await this.turns.forget(this.run.id);
    return endAnswer(view, earlier);
  }

  /** The outcomes published since of calls answered "waits", each told once. */
  async #earlier(): Promise<Content> {
    const told: Content = [];
    for (const [callId, approvalId] of this.#awaiting) {
      const result = await this.turns.takeResult(this.run.id, callId, await this.#blocking(), 0);
      if (!result) continue;
      this.#awaiting.delete(callId);
      told.push(earlierOutcome(result, approvalId));
    }
    return told;
  }

  async #view(): Promise<RunView> {
    const view = await this.store.getRun(this.run.id, this.run.tenant);
    if (!view) throw new Error(`run ${this.run.id} is gone`);
    return view;
  }

  #blocking(): Promise<RedisClient> {
    this.#connection ??= this.turns.blocking();
    return this.#connection;
  }
}
