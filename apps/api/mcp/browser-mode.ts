import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  type ApiKeyIdentity,
  actArgsSchema,
  MCP_FINISH_ANSWER_MAX_CHARS,
  type McpBrowserTool,
  navigateArgsSchema,
  observeArgsSchema,
  type RunView,
  requestPersonArgsSchema,
} from '../../../libs/contracts/index.js';
import { BOUND_TOOL_DEFINITIONS, selectRunLimits } from '../../../libs/runtime/index.js';
import { McpTurns } from '../../../libs/store/mcp-turns.js';
import type { RedisClient } from '../../../libs/store/redis-client.js';
import type { V1Dependencies } from '../routes/shared.js';
import { BrowserModeDriver } from './browser-mode-driver.js';

/**
 * MCP browser mode: what the MCP plumbing (`apps/api/mcp/server.ts`) hands the browser
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

/** The run's deadline, from its start: as a REST submission's default. */
export const BROWSER_MODE_RUN_TIMEOUT_MS = 3600_000;

/**
 * Starts the run whose model is the MCP client, and the MCP server of its tools: `navigate`,
 * `observe` and `act` with the browser tools' own arguments and descriptions, and `finish`. Each
 * call is one turn of the run, under every rule a worker-driven run has (leases, origin fencing,
 * the loop breaker, approvals, budgets).
 */
export async function openBrowserMode(context: BrowserModeContext): Promise<BrowserMode> {
  const run = await startDrivenRun(context);
  const driver = new BrowserModeDriver(
    new McpTurns(context.redis, context.deps.config.redis.keyPrefix),
    context.deps.store,
    run,
  );
  const server = new McpServer(
    { name: 'leasehold-browser', version: '1.0.0' },
    {
      instructions: `You drive Leasehold run ${run.id} in a browser bound to one profile: navigate, observe and act on its page, then finish with your answer. Each call is one turn of the run and counts against its budget. An act may wait for a person's approval; its outcome comes with a later call.`,
    },
  );
  const tool =
    (name: McpBrowserTool) => async (args: Record<string, unknown>, extra: { signal: AbortSignal }) =>
      driver.call(name, args, extra.signal);
  server.registerTool(
    'navigate',
    { description: descriptionOf('browser.navigate'), inputSchema: navigateArgsSchema },
    tool('navigate'),
  );
  server.registerTool(
    'observe',
    { description: descriptionOf('browser.observe'), inputSchema: observeArgsSchema },
    tool('observe'),
  );
  server.registerTool(
    'act',
    { description: descriptionOf('browser.act'), inputSchema: actArgsSchema },
    tool('act'),
  );
  server.registerTool(
    'request_person',
    { description: descriptionOf('browser.request_person'), inputSchema: requestPersonArgsSchema },
    tool('request_person'),
  );
  server.registerTool(
    'finish',
    {
      description: 'End the run with your answer: the run succeeds with it. No call is taken after it.',
      inputSchema: z.strictObject({ answer: z.string().max(MCP_FINISH_ANSWER_MAX_CHARS) }),
    },
    tool('finish'),
  );
  return {
    server,
    runId: run.id,
    async close() {
      driver.close();
    },
  };
}

/** The run loop's own description of a browser tool, so the client's model reads what a model would. */
function descriptionOf(name: string): string {
  const definition = BOUND_TOOL_DEFINITIONS.find((candidate) => candidate.name === name);
  if (!definition) throw new Error(`no browser tool ${name}`);
  return definition.description;
}

/**
 * Submits the session's run, driven by this key: its input says `driver: 'mcp'`, the key's id and
 * the keys that made it, so the run worker takes its model's turns from this client, and no key of
 * the driver's creation chain decides its approvals.
 */
async function startDrivenRun(context: BrowserModeContext): Promise<RunView> {
  const { deps, identity, sessionId } = context;
  const session = await deps.store.getSession(identity.tenant, sessionId);
  if (!session) throw new ApiError('not_found', `session ${sessionId} not found`);
  if (!session.browser_profile_id)
    throw new ApiError(
      'validation_failed',
      `session ${sessionId} is bound to no browser profile; the browser mode needs a bound session`,
    );
  const agent = await deps.store.getAgentVersion(identity.tenant, session.agent_id, session.agent_version);
  if (!agent) throw new ApiError('not_found', `agent version ${session.agent_version} not found`);
  // The driver's makers go with the run: a key revoked later still counts as of its chain.
  const lineage = await deps.store.apiKeyLineage(identity.tenant, identity.key_id);
  if (!lineage) throw new ApiError('unauthorized', 'this API key was revoked');
  const input = {
    text: `Driven over MCP (browser mode) by API key ${identity.key_id}.`,
    driver: 'mcp',
    driver_key_id: identity.key_id,
    driver_makers: lineage.makers,
  };
  const outcome = await deps.store.submitRun({
    tenant: identity.tenant,
    principal: identity.principal,
    sessionId,
    input,
    limits: selectRunLimits(deps.config.limits, session, agent),
    session,
    timeoutMs: BROWSER_MODE_RUN_TIMEOUT_MS,
    request: { mcp_browser_mode: input },
  });
  // Enqueued after the record exists, as the REST submission does.
  if (outcome.run.status === 'queued') await deps.lifecycle.followUp(outcome.run);
  return outcome.run;
}
