import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { FastifyInstance } from 'fastify';
import type { ApiKeyIdentity } from '../../../libs/contracts/index.js';
import type { RedisClient } from '../../../libs/store/redis-client.js';
import type { V1Dependencies } from '../routes/shared.js';

/**
 * Issue 16, MCP browser mode: what the MCP plumbing (`apps/api/mcp/server.ts`) hands the browser
 * mode when a client opens `/mcp/browser/:session_id` (its `initialize`), already authenticated.
 */
export interface BrowserModeContext {
  app: FastifyInstance;
  deps: V1Dependencies;
  /** The API's producer connection. */
  redis: RedisClient;
  /** The key that opened this MCP session (it drives the run; it may never decide its approvals). */
  identity: ApiKeyIdentity;
  /** The request's `authorization` header, for calls through `app.inject` as this key. */
  authorization: string;
  /** The session the run is started in (bound to a browser profile). */
  sessionId: string;
}

/** One open browser mode: the MCP server for this MCP session, and the run it drives. */
export interface BrowserMode {
  server: McpServer;
  runId: string;
  /** The MCP session ended (DELETE, transport closed): nothing to do for the run, whose idle timeout ends it. */
  close(): Promise<void>;
}

/** Starts the run whose model is the MCP client, and the MCP server of its tools. Stub. */
export async function openBrowserMode(_context: BrowserModeContext): Promise<BrowserMode> {
  throw new Error('MCP browser mode is not built yet');
}
