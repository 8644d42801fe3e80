import {
  type McpTurnCall,
  type McpTurnResult,
  mcpTurnCallSchema,
  mcpTurnResultSchema,
} from '../contracts/index.js';
import { duplicateUnbatched, type RedisClient } from './redis-client.js';

/**
 * How long the channel's keys outlive their last write: past the longest run deadline (24 h), so a
 * key is never gone while its run can still read it, and gone on its own after.
 */
export const MCP_TURN_KEY_TTL_MS = 25 * 3600_000;

/**
 * MCP browser mode: the channel between the API (which holds the MCP client's session)
 * and the run worker (whose model is that client), on the run's own keys (hash tag `{run:ID}`, one
 * Redis Cluster slot):
 * - `:mcp:calls`, a list: the client's calls, pushed by the API, in order;
 * - `:mcp:taken`, a list of at most one: the call the worker's model took and has not yet seen
 *   recorded in the transcript — a worker that crashes in between takes the same call again;
 * - `:mcp:result:<call id>`, a list: the call's outcome, pushed by the worker, popped by the API.
 * Every key expires ({@link MCP_TURN_KEY_TTL_MS}). Blocking reads go over a connection of their own
 * ({@link McpTurns.blocking}), never the shared one, which they would hold up.
 */
export class McpTurns {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  #calls(runId: string): string {
    return `${this.prefix}{run:${runId}}:mcp:calls`;
  }
  #taken(runId: string): string {
    return `${this.prefix}{run:${runId}}:mcp:taken`;
  }
  #result(runId: string, callId: string): string {
    return `${this.prefix}{run:${runId}}:mcp:result:${callId}`;
  }

  /** A connection of its own for blocking reads, connected (the caller closes it with `disconnect()`). */
  async blocking(): Promise<RedisClient> {
    // Its BLPOP would hold every command batched behind it: never auto-pipelined.
    const connection = duplicateUnbatched(this.redis);
    // Errors are answered by the commands that meet them; an unhandled 'error' event would crash.
    connection.on('error', () => {});
    if (connection.status === 'wait') await connection.connect();
    return connection;
  }

  /** The API side: hands one of the client's calls to the run's worker. */
  async pushCall(runId: string, call: McpTurnCall): Promise<void> {
    const key = this.#calls(runId);
    await this.redis
      .multi()
      .rpush(key, JSON.stringify(mcpTurnCallSchema.parse(call)))
      .pexpire(key, MCP_TURN_KEY_TTL_MS)
      .exec();
  }

  /**
   * The worker side: the call its model answers next. A call taken before whose turn the
   * transcript does not hold (`recorded` lacks its id: the worker crashed in between) is taken
   * again; one it holds is dropped, and the next call is awaited on `connection` for at most
   * `waitMs`. Undefined when none came.
   */
  async takeCall(
    runId: string,
    recorded: ReadonlySet<string>,
    connection: RedisClient,
    waitMs: number,
  ): Promise<McpTurnCall | undefined> {
    const taken = this.#taken(runId);
    const held = await this.redis.lindex(taken, 0);
    if (held !== null) {
      const call = mcpTurnCallSchema.safeParse(JSON.parse(held));
      if (call.success && !recorded.has(call.data.id)) return call.data;
      await this.redis.del(taken);
    }
    // BLMOVE's timeout is in seconds, a decimal; 0 would block for ever.
    const seconds = Math.max(0.01, waitMs / 1000);
    const moved = await connection.blmove(this.#calls(runId), taken, 'LEFT', 'RIGHT', seconds);
    if (moved === null) return undefined;
    await this.redis.pexpire(taken, MCP_TURN_KEY_TTL_MS);
    const call = mcpTurnCallSchema.safeParse(JSON.parse(moved));
    if (!call.success) {
      // Only the API writes this list; a record it did not write is dropped, never acted on.
      await this.redis.del(taken);
      return undefined;
    }
    return call.data;
  }

  /**
   * The worker side: the outcomes of the calls its previous turn made. Publishing again (a resumed
   * execution does) pushes a copy the API never reads: it reads each call's result once; the copy
   * expires with its key.
   */
  async publishResults(runId: string, results: readonly McpTurnResult[]): Promise<void> {
    if (results.length === 0) return;
    const batch = this.redis.multi();
    for (const result of results) {
      const key = this.#result(runId, result.call_id);
      batch.rpush(key, JSON.stringify(mcpTurnResultSchema.parse(result))).pexpire(key, MCP_TURN_KEY_TTL_MS);
    }
    await batch.exec();
  }

  /**
   * The API side, once the run has ended: its calls not taken and the call last taken are dropped
   * now, not at their expiry — a call's arguments may carry a secret (a password to fill).
   */
  async forget(runId: string): Promise<void> {
    await this.redis.del(this.#calls(runId), this.#taken(runId));
  }

  /** The API side: the call's result, waiting on `connection` for at most `waitMs`; 0 waits not at all. */
  async takeResult(
    runId: string,
    callId: string,
    connection: RedisClient,
    waitMs: number,
  ): Promise<McpTurnResult | undefined> {
    const key = this.#result(runId, callId);
    const raw = waitMs <= 0 ? await this.redis.lpop(key) : (await connection.blpop(key, waitMs / 1000))?.[1];
    if (raw === null || raw === undefined) return undefined;
    const result = mcpTurnResultSchema.safeParse(JSON.parse(raw));
    return result.success ? result.data : undefined;
  }
}
