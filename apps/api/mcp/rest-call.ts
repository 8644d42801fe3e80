import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import type { FastifyInstance } from 'fastify';
import type { ApiErrorBody } from '../../../libs/contracts/index.js';

/** What a REST route answered: its JSON body, or its error in the one shape. */
export type RestOutcome =
  | { ok: true; status: number; body: unknown }
  | { ok: false; status: number; body: ApiErrorBody };

/**
 * One REST call made inside this API as the MCP caller (its own `authorization` header), through
 * `app.inject`: the route's scope, tenancy, validation, rate limit and errors are REST's own, so a
 * tool can never do what the key could not do over REST.
 */
export async function callRest(
  app: FastifyInstance,
  authorization: string,
  request: { method: 'GET' | 'POST'; url: string; body?: unknown; headers?: Record<string, string> },
): Promise<RestOutcome> {
  const hasBody = request.body !== undefined;
  const response = await app.inject({
    method: request.method,
    url: request.url,
    headers: {
      authorization,
      ...(hasBody ? { 'content-type': 'application/json' } : {}),
      ...request.headers,
    },
    ...(hasBody ? { payload: JSON.stringify(request.body) } : {}),
  });
  const body: unknown = response.body ? JSON.parse(response.body) : undefined;
  if (response.statusCode < 400) return { ok: true, status: response.statusCode, body };
  return { ok: false, status: response.statusCode, body: asErrorBody(body, response.statusCode) };
}

function asErrorBody(body: unknown, status: number): ApiErrorBody {
  const error = (body as Partial<ApiErrorBody> | undefined)?.error;
  if (error && typeof error.code === 'string' && typeof error.message === 'string')
    return { error: { code: error.code, message: error.message } };
  return { error: { code: 'internal', message: `the REST route answered ${status} without an error body` } };
}

/** A tool's answer: the JSON as text (what every MCP client shows a model). */
export function jsonResult(body: unknown): CallToolResult {
  return { content: [{ type: 'text', text: JSON.stringify(body) }] };
}

/** A tool's refusal: `isError` with the REST error's `{error: {code, message}}` as its text. */
export function errorResult(code: string, message: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text: JSON.stringify({ error: { code, message } }) }] };
}

/** A REST outcome as a tool's answer. */
export function toolResult(outcome: RestOutcome): CallToolResult {
  return outcome.ok
    ? jsonResult(outcome.body)
    : errorResult(outcome.body.error.code, outcome.body.error.message);
}

/** The prefix the SDK's McpError puts before a message: `MCP error -32602: `. */
const MCP_ERROR_PREFIX = /^MCP error -?\d+: /;

/**
 * The SDK answers a call it refuses before or around the tool (arguments the tool's schema refuses,
 * an unknown tool, a tool that threw) as `isError` with its bare message; this gives those the one
 * shape too: `validation_failed` with the schema's complaint, `not_found`, or `internal` (a throw's
 * message is never echoed). `createToolError` is private to McpServer in
 * @modelcontextprotocol/sdk 1.32.2: the e2e test of refused arguments fails if a version moves it.
 */
export function answerRefusalsInOneShape(server: McpServer): void {
  const internals = server as unknown as { createToolError?: (message: string) => CallToolResult };
  if (typeof internals.createToolError !== 'function')
    throw new Error('McpServer.createToolError is gone: check how this SDK version answers refused calls');
  internals.createToolError = (message: string) => {
    const bare = message.replace(MCP_ERROR_PREFIX, '');
    if (bare.startsWith('Input validation error: ')) return errorResult('validation_failed', bare);
    if (/^Tool \S+ (not found|disabled)$/.test(bare)) return errorResult('not_found', bare);
    return errorResult('internal', 'the tool failed; see the API log');
  };
}
