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
