import type { Socket } from 'node:net';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_ERROR_STATUS, type ApiErrorBody } from '../contracts/index.js';
import { isRedisUnreachable } from './redis-link.js';

/**
 * The one error shape of both HTTP servers (DESIGN §8): every 4xx and 5xx leaves as
 * `{"error":{"code","message"}}` — router errors, unknown routes, bad bodies and a plugin's own
 * answers included. Messages are written here, never copied from a header, and a 5xx never says
 * more than `internal error` (the cause goes to the log).
 */

export function errorBody(
  code: string,
  message: string,
  details: Record<string, unknown> = {},
): ApiErrorBody {
  return { error: { code, message, ...details } };
}

/** The stable code for a status: the table's own code, else `bad_request` (4xx) or `internal` (5xx). */
export function errorCodeForStatus(status: number): string {
  const exact = Object.entries(API_ERROR_STATUS).find(([, value]) => value === status);
  if (exact) return exact[0];
  return status >= 500 ? 'internal' : 'bad_request';
}

/** Longest piece of a request echoed back in a message: enough to recognise, never a flood. */
const ECHO_LIMIT_CHARS = 120;

function echo(text: string): string {
  return text.length > ECHO_LIMIT_CHARS ? `${text.slice(0, ECHO_LIMIT_CHARS)}…` : text;
}

/** What the framework's own errors say, in our words (Fastify's codes, `lib/errors.js`). */
const FRAMEWORK_MESSAGES: Record<string, string> = {
  FST_ERR_BAD_URL: 'the URL is not valid percent-encoded text',
  FST_ERR_MAX_PARAM_LENGTH: 'a path segment is too long',
  FST_ERR_ASYNC_CONSTRAINT: 'the request could not be routed',
  FST_ERR_CTP_INVALID_JSON_BODY: 'body: expected JSON',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'body: expected JSON, got an empty body with a JSON content type',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'content-type: expected application/json',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'content-length does not match the body',
  FST_ERR_CTP_INSTANCE_ALREADY_SET: 'the body could not be read',
};

/**
 * The status and body for an error no route phrased itself: Fastify's (routing, body parsing,
 * size) or an unexpected one (500, logged by the caller).
 */
export function frameworkErrorAnswer(
  error: Pick<FastifyError, 'code' | 'statusCode' | 'message'>,
  bodyLimitBytes: number,
): { status: number; body: ApiErrorBody } {
  if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
    return { status: 413, body: errorBody('payload_too_large', `body over ${bodyLimitBytes} bytes`) };
  // A request that failed because Redis did not answer may succeed when it is back.
  if (isRedisUnreachable(error)) return { status: 503, body: unavailableBody() };
  const status =
    error.statusCode && error.statusCode >= 400 && error.statusCode < 600 ? error.statusCode : 500;
  if (status >= 500) return { status, body: errorBody(errorCodeForStatus(status), 'internal error') };
  const message = FRAMEWORK_MESSAGES[error.code] ?? echo(error.message);
  return { status, body: errorBody(errorCodeForStatus(status), message) };
}

/** Answers any error in the one shape; 5xx are logged with their cause. */
export function sendFrameworkError(
  error: FastifyError | Error,
  request: FastifyRequest,
  reply: FastifyReply,
  bodyLimitBytes: number,
): FastifyReply {
  const { status, body } = frameworkErrorAnswer(error as FastifyError, bodyLimitBytes);
  // An outage is logged once by the link watch, not once per request with a stack.
  if (status === 503) {
    request.log.debug({ code: body.error.code }, 'request refused: Redis unavailable');
    return sendUnavailable(request, reply, body);
  }
  if (status >= 500) request.log.error({ err: error }, 'request failed');
  return reply.code(status).type('application/json; charset=utf-8').send(body);
}

/**
 * 503 for an outage: the one JSON error shape, but for a browser loading a page (its `Accept`
 * leads with text/html) a short HTML page that says so and loads itself again in 2 s. A page
 * answered with JSON has no script left to try again, so a brief outage would leave the person on
 * it for good. No script: the refresh is a `<meta>`, which the pages' policy allows.
 */
export function sendUnavailable(
  request: FastifyRequest,
  reply: FastifyReply,
  body: ApiErrorBody,
): FastifyReply {
  reply.code(503).header('retry-after', '1');
  if (!(request.headers.accept ?? '').startsWith('text/html'))
    return reply.type('application/json; charset=utf-8').send(body);
  return reply
    .type('text/html; charset=utf-8')
    .header('cache-control', 'no-store')
    .send(
      `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="2"><title>Leasehold: try again shortly</title></head><body><main><h1>Try again shortly</h1><p>${UNAVAILABLE_TEXT}: this page loads itself again in 2 s.</p></main></body></html>`,
    );
}

/** What an outage answer says (its message, and the outage page's text). */
const UNAVAILABLE_TEXT = 'the store did not answer';

/** The body of every outage answer: the store did not answer in its bound. */
export function unavailableBody(): ApiErrorBody {
  return errorBody('unavailable', `${UNAVAILABLE_TEXT}; retry shortly`);
}

/** The not-found answer: the method and path without the query (a query may carry anything). */
export function notFoundBody(request: FastifyRequest): ApiErrorBody {
  const path = request.url.split('?')[0] ?? '';
  return errorBody('not_found', `no route ${echo(request.method)} ${echo(path)}`);
}

/**
 * Node's answer to a request it cannot parse or that timed out, before Fastify sees it (Fastify's
 * `clientErrorHandler`): the one shape, then the connection closes.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable) return;
  const timedOut = error.code === 'ERR_HTTP_REQUEST_TIMEOUT';
  const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
  const status = timedOut ? 408 : tooLarge ? 431 : 400;
  const message = timedOut
    ? 'the request took too long to arrive'
    : tooLarge
      ? 'the request headers are too large'
      : 'the request is not valid HTTP';
  const body = JSON.stringify(errorBody(errorCodeForStatus(status), message));
  socket.end(
    `HTTP/1.1 ${status} ${timedOut ? 'Request Timeout' : tooLarge ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      `Connection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

function isOneShape(payload: unknown): boolean {
  if (typeof payload !== 'string') return false;
  try {
    const parsed = JSON.parse(payload) as { error?: { code?: unknown; message?: unknown } };
    return typeof parsed.error?.code === 'string' && typeof parsed.error.message === 'string';
  } catch {
    return false;
  }
}

/**
 * For a plugin that phrases its own errors (Bull Board answers `{error: {key}}`): its 4xx and
 * 5xx are rewritten to the one shape before they leave. Its translation key, when it gave one,
 * stays as `key` so its own page can still show it.
 */
export function reshapeErrorAnswers(instance: FastifyInstance): void {
  instance.addHook('onSend', async (_request, reply, payload) => {
    if (reply.statusCode < 400 || isOneShape(payload)) return payload;
    let key: string | undefined;
    if (typeof payload === 'string') {
      try {
        const parsed = JSON.parse(payload) as { error?: { key?: unknown } };
        if (typeof parsed.error?.key === 'string') key = parsed.error.key;
      } catch {
        key = undefined;
      }
    }
    const code = errorCodeForStatus(reply.statusCode);
    const message = reply.statusCode >= 500 ? 'internal error' : (key ?? code.replaceAll('_', ' '));
    reply.type('application/json; charset=utf-8');
    reply.removeHeader('content-length');
    return JSON.stringify(errorBody(code, message, key ? { key } : {}));
  });
}
