import { randomUUID } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { isInitializeRequest } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  type ApiKeyIdentity,
  JSON_MAX_DEPTH,
  jsonDepthProblem,
  recordIdSchema,
} from '../../../libs/contracts/index.js';
import {
  type McpSessionSlot,
  type McpSessionSlotLimits,
  McpSessionSlots,
  type RunStore,
} from '../../../libs/store/index.js';
import type { RedisClient } from '../../../libs/store/redis-client.js';
import { authenticate, identityOf } from '../auth.js';
import { typed, type V1Dependencies } from '../routes/shared.js';
import { openBrowserMode } from './browser-mode.js';
import { createRunsServer } from './runs-tools.js';
import {
  compileMcpSessionOptions,
  type McpSessionEntry,
  type McpSessionOptions,
  McpSessionTable,
} from './sessions.js';

export interface McpDependencies {
  store: RunStore;
  /** The API's producer connection (the browser mode's run records). */
  redis: RedisClient;
  /** The REST routes' dependencies (the browser mode starts its run with them). */
  deps: V1Dependencies;
  /** The session table's bounds in this process; defaults in {@link compileMcpSessionOptions}. */
  sessions?: Partial<McpSessionOptions>;
  /** Sessions per tenant and per key across the fleet (MCP_SESSIONS_PER_*), counted in Redis. */
  places: Pick<McpSessionSlotLimits, 'perTenant' | 'perKey'> & Partial<Pick<McpSessionSlotLimits, 'ttlMs'>>;
  /** The key prefix of Leasehold's records (the places' sets live under it). */
  keyPrefix: string;
}

/**
 * How long a session's place lasts unless renewed: the most a replica that died holding sessions
 * keeps their places from others. Renewed every third of it, so a minute costs a few commands a
 * session per minute.
 */
const PLACE_TTL_MS = 60_000;

/**
 * Containers a JSON-RPC message may nest: the REST bound on a free-form field (JSON_MAX_DEPTH) for
 * a tool's `arguments`, plus the envelope around them (a batch, the message, its `params`).
 */
export const MCP_MESSAGE_MAX_DEPTH = JSON_MAX_DEPTH + 3;

/** The MCP server's open sessions, closed with the API. */
export interface McpHandle {
  /** Open MCP sessions in this process. */
  readonly sessionCount: number;
  /** Ends every open session (its streams too): before the HTTP server closes, which they would hold. */
  close(): Promise<void>;
}

/** What one MCP session serves, made on its `initialize`. */
interface Opened {
  server: McpServer;
  /** Called once the session has ended (DELETE, eviction, the API's close). */
  ended?: () => Promise<void>;
}

/** An open session: the table's entry with the transport its requests are handed to. */
interface OpenSession extends McpSessionEntry {
  transport: StreamableHTTPServerTransport;
}

const METHODS = ['POST', 'GET', 'DELETE'] as const;

/**
 * The MCP server on the API, over Streamable HTTP (POST a message, GET the session's
 * event stream, DELETE to end it), stateful by `Mcp-Session-Id`:
 * - `/mcp`, the runs mode (key scope runs:read to open; each tool then needs what its REST route
 *   needs);
 * - `/mcp/browser/:session_id`, the browser mode (runs:write), whose MCP client is that session's model.
 * Both doors are the API's own (default-deny, a key on every request, 401 in the one shape); a
 * session answers only the key that opened it, at the path it was opened at (404 to anyone else).
 */
export async function registerMcp(root: FastifyInstance, mcp: McpDependencies): Promise<McpHandle> {
  const app = typed(root);
  const places = new McpSessionSlots(mcp.redis, mcp.keyPrefix, {
    ttlMs: PLACE_TTL_MS,
    ...mcp.places,
  });
  const table = new McpSessionTable<OpenSession>(
    compileMcpSessionOptions(mcp.sessions),
    places,
    Date.now,
    (error) => root.log.warn({ err: error }, 'MCP session places: Redis did not answer'),
  );

  app.route({
    method: [...METHODS],
    url: '/mcp',
    preHandler: authenticate(mcp.store, 'runs:read'),
    handler: (request, reply) =>
      serve(request, reply, '/mcp', async (_identity, authorization) => ({
        server: createRunsServer({ app: root, authorization }),
      })),
  });

  app.route({
    method: [...METHODS],
    url: '/mcp/browser/:session_id',
    schema: { params: z.object({ session_id: recordIdSchema }) },
    preHandler: authenticate(mcp.store, 'runs:write'),
    handler: (request, reply) =>
      serve(request, reply, `/mcp/browser/${request.params.session_id}`, async (identity, authorization) => {
        const mode = await openBrowserMode({
          app: root,
          deps: mcp.deps,
          redis: mcp.redis,
          identity,
          authorization,
          sessionId: request.params.session_id,
        });
        return { server: mode.server, ended: () => mode.close() };
      }),
  });

  /**
   * Hands one request to its session's transport (made here on `initialize`). Refusals before the
   * hand-over answer in the API's one error shape; what the transport answers is MCP's.
   */
  async function serve(
    request: FastifyRequest,
    reply: FastifyReply,
    route: string,
    open: (identity: ApiKeyIdentity, authorization: string) => Promise<Opened>,
  ): Promise<void> {
    const identity = identityOf(request);
    const authorization = request.headers.authorization;
    // A run page's cookie opens /v1 for the page's own script, and a browser may replay Basic
    // credentials it cached for the dashboard: an MCP client brings its key as a Bearer token.
    if (!authorization?.startsWith('Bearer ') || request.uiSession)
      throw new ApiError('unauthorized', 'MCP needs an API key (Authorization: Bearer <key>)');
    // A message nested past the REST bound is refused in the REST shape before the SDK parses it
    // (its answer would be a 200 carrying the whole validation report).
    const tooDeep = jsonDepthProblem(request.body, MCP_MESSAGE_MAX_DEPTH);
    if (tooDeep) throw new ApiError('validation_failed', `body: ${tooDeep}`);
    const header = request.headers['mcp-session-id'];
    const mcpSessionId = typeof header === 'string' ? header : undefined;
    let transport: StreamableHTTPServerTransport;
    let entry: OpenSession | undefined;
    if (mcpSessionId !== undefined) {
      entry = table.find(mcpSessionId, identity.key_id, route);
      if (!entry)
        throw new ApiError(
          'not_found',
          `MCP session ${mcpSessionId.slice(0, 64)} not found here (ended, evicted, or opened by another key): initialize a new one`,
        );
      transport = entry.transport;
    } else {
      if (request.method !== 'POST' || !isInitializeRequest(request.body))
        throw new ApiError(
          'bad_request',
          'no Mcp-Session-Id: open a session with an initialize request first',
        );
      const place: McpSessionSlot = {
        sessionId: randomUUID(),
        tenant: identity.tenant,
        keyId: identity.key_id,
      };
      await table.reserve(place);
      try {
        transport = await openSession(identity, authorization, route, place.sessionId, open);
      } catch (error) {
        await table.abandon(place);
        throw error;
      }
      // An initialize the transport refused (e.g. a wrong Accept header) opened nothing to keep.
      const opening = transport;
      reply.raw.once('close', () => {
        if (opening.sessionId !== undefined) return;
        void opening.close();
        void table.abandon(place);
      });
    }
    reply.hijack();
    const done = entry ? table.begin(entry) : () => undefined;
    reply.raw.once('close', done);
    try {
      await transport.handleRequest(request.raw, reply.raw, request.body);
    } catch (error) {
      request.log.warn({ err: error }, 'MCP request failed');
      if (!reply.raw.headersSent) reply.raw.writeHead(500, { 'content-type': 'application/json' });
      if (!reply.raw.writableEnded)
        reply.raw.end(JSON.stringify({ error: { code: 'internal', message: 'internal error' } }));
    }
  }

  async function openSession(
    identity: ApiKeyIdentity,
    authorization: string,
    route: string,
    sessionId: string,
    open: (identity: ApiKeyIdentity, authorization: string) => Promise<Opened>,
  ): Promise<StreamableHTTPServerTransport> {
    // Opened first: a browser mode that cannot start answers in the one shape, and nothing is kept.
    const opened = await open(identity, authorization);
    let ended = false;
    // Once, whichever comes first: DELETE, eviction, the API's close, or an initialize that failed.
    const end = async (id: string | undefined): Promise<void> => {
      if (ended) return;
      ended = true;
      if (id !== undefined) await table.remove(id);
      try {
        await opened.server.close(); // closes the transport and its open streams
        await opened.ended?.();
      } catch (error) {
        root.log.warn({ err: error }, 'MCP session close failed');
      }
    };
    const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
      // The id whose place was taken before the session was made.
      sessionIdGenerator: () => sessionId,
      onsessioninitialized: (id) => {
        table.add({
          id,
          tenant: identity.tenant,
          keyId: identity.key_id,
          route,
          transport,
          close: () => end(id),
        });
      },
    });
    // DELETE, or the transport closed by anything else: the session is over.
    transport.onclose = () => void end(transport.sessionId);
    await opened.server.connect(transport);
    return transport;
  }

  return {
    get sessionCount() {
      return table.size;
    },
    close: () => table.close(),
  };
}
