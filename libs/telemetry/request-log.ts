import { randomUUID } from 'node:crypto';
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Registry } from 'prom-client';
import { type HttpMetrics, httpMetrics } from './http-metrics.js';

/** The header a request id arrives in and is echoed back in, on every answer. */
export const REQUEST_ID_HEADER = 'x-request-id';

/**
 * A caller's request id is taken as it is when it is 1-128 visible ASCII characters; anything else
 * (empty, longer, spaces, control or non-ASCII characters, a repeated header) is replaced by a
 * fresh UUID, so a log line never carries a flood or a forged line break from a header.
 */
const ACCEPTED_REQUEST_ID = /^[\x21-\x7e]{1,128}$/;

/** The request id of a request: the caller's `x-request-id` when acceptable, else a new UUID. */
export function requestIdOf(header: string | string[] | undefined): string {
  return typeof header === 'string' && ACCEPTED_REQUEST_ID.test(header) ? header : randomUUID();
}

/**
 * Probes and scrapes come every few seconds from every load balancer and Prometheus: their lines
 * are logged at debug, so at info the log holds the requests people and run workers make.
 */
const PROBE_ROUTES: ReadonlySet<string> = new Set(['/healthz', '/readyz', '/metrics']);

/** The route label of a request that matched no route (a 404 or a router error). */
export const UNMATCHED_ROUTE = 'unmatched';

/** Methods counted by name; any other (a client may send any token) is counted as `other`. */
const KNOWN_METHODS: ReadonlySet<string> = new Set([
  'GET',
  'HEAD',
  'POST',
  'PUT',
  'PATCH',
  'DELETE',
  'OPTIONS',
]);

/** The `server` label of each server `createHttpServer` makes, by its component. */
const SERVER_LABELS: Readonly<Record<string, string>> = {
  api: 'api',
  'data-plane': 'data_plane',
  'ops-http': 'ops',
};

/** Reads the tenant a request was authenticated as; undefined before authentication or without one. */
export type TenantReader = (request: FastifyRequest) => string | undefined;

interface RequestLogState {
  server: string;
  tenantOf?: TenantReader;
  metrics?: HttpMetrics;
}

const stateByServer = new WeakMap<FastifyInstance, RequestLogState>();

/** One request's line and count, when its answer has gone out. */
function requestEnded(state: RequestLogState, request: FastifyRequest, reply: FastifyReply): void {
  const matched = request.routeOptions.url !== undefined && !request.is404;
  const route = matched ? (request.routeOptions.url as string) : UNMATCHED_ROUTE;
  const method = KNOWN_METHODS.has(request.method) ? request.method : 'other';
  const status = reply.statusCode;
  const durationMs = reply.elapsedTime;
  const tenant = state.tenantOf?.(request);
  const line = {
    method,
    route,
    status,
    duration_ms: Math.round(durationMs * 10) / 10,
    ...(tenant !== undefined ? { tenant } : {}),
  };
  // request.log carries req_id (Fastify's requestIdLogLabel, set by createHttpServer).
  const level = matched && PROBE_ROUTES.has(route) ? 'debug' : 'info';
  request.log[level](line, 'request answered');
  state.metrics?.requests.inc({ server: state.server, method, route, status: String(status) });
  state.metrics?.seconds.observe({ server: state.server, method, route }, durationMs / 1000);
}

/**
 * One log line and one count per request on `app`, whose server label comes from its
 * `component` (`api`, `data-plane` → `data_plane`, `ops-http` → `ops`). Installed by
 * `createHttpServer` before any other hook, so the id is echoed on every answer — a 401 the doors
 * send, a 404, an error, a hijacked event stream (the header is set on the raw response, which
 * Fastify's own headers and a hijacker's `writeHead` are merged with). Counting starts once
 * {@link countRequests} gives the registry.
 */
export function installRequestLog(app: FastifyInstance, component: string): void {
  const state: RequestLogState = { server: SERVER_LABELS[component] ?? component };
  stateByServer.set(app, state);
  app.addHook('onRequest', async (request, reply) => {
    reply.raw.setHeader(REQUEST_ID_HEADER, request.id);
  });
  app.addHook('onResponse', async (request, reply) => {
    requestEnded(state, request, reply);
  });
}

/**
 * Wraps a server's `frameworkErrors` answer (a URL the router cannot decode, an over-long path
 * segment): such a request never reaches a hook, so its id is echoed and its line written here.
 */
export function loggingFrameworkErrors(
  component: string,
  answer: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void,
): (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => void {
  return (error, request, reply) => {
    reply.raw.setHeader(REQUEST_ID_HEADER, request.id);
    reply.raw.once('finish', () => {
      const state = stateByServer.get(request.server) ?? { server: SERVER_LABELS[component] ?? component };
      requestEnded(state, request, reply);
    });
    answer(error, request, reply);
  };
}

/** The tenant each request's line names once the request is authenticated (the server's own rule). */
export function logTenantOf(app: FastifyInstance, tenantOf: TenantReader): void {
  const state = stateByServer.get(app);
  if (!state) throw new Error('logTenantOf: the server was not made by createHttpServer');
  state.tenantOf = tenantOf;
}

/**
 * Counts `app`'s requests in `registry`: `leasehold_http_requests_total{server,method,route,status}`
 * and `leasehold_http_request_duration_seconds{server,method,route}`, by route template (never the
 * raw URL, so the labels stay bounded). Called by `registerOpsRoutes`, so every server with the
 * ops routes counts its own requests in its process's registry (the fleet's roles share one).
 */
export function countRequests(app: FastifyInstance, registry: Registry): void {
  const state = stateByServer.get(app);
  if (state) state.metrics = httpMetrics(registry);
}
