import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { Doors, PUBLIC_ROUTE } from './http-doors.js';
import {
  answerClientError,
  notFoundBody,
  sendFrameworkError,
  sendUnavailable,
  unavailableBody,
} from './http-errors.js';
import { redisLink } from './redis-link.js';
import { countRequests, installRequestLog, loggingFrameworkErrors, requestIdOf } from './request-log.js';

/** One named readiness check; it throws or returns false when the process cannot serve. */
export interface ReadinessCheck {
  name: string;
  check: () => Promise<boolean>;
}

const CHECK_TIMEOUT_MS = 2_000;

async function runCheck({
  name,
  check,
}: ReadinessCheck): Promise<{ name: string; ok: boolean; error?: string }> {
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS} ms`)),
        CHECK_TIMEOUT_MS,
      );
    });
    const ok = await Promise.race([check(), timeout]);
    return { name, ok };
  } catch (error) {
    return { name, ok: false, error: (error as Error).message };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * `/healthz` (the process is alive), `/readyz` (every check passes; 503 naming the failing ones)
 * and `/metrics` (Prometheus text) on any Fastify instance.
 */
export function registerOpsRoutes(
  app: FastifyInstance,
  registry: Registry,
  checks: () => ReadinessCheck[],
  /**
   * `serveMetrics: false` leaves `/metrics` out (it answers 404): in the fleet every role shares one
   * registry and only the API serves it, so no series is scraped twice.
   */
  /** `redisUp`: whether this role's own Redis connections answer (the process's link by default). */
  options: { serveMetrics?: boolean; redisUp?: () => boolean } = {},
): void {
  // Each server counts its own requests in its process's registry, served or not here.
  countRequests(app, registry);
  // Public by design: a load balancer and Prometheus call them without credentials.
  // They name checks and counts, never a record.
  app.get('/healthz', { config: PUBLIC_ROUTE }, async () => ({ status: 'ok' }));
  // Every role is unready while one of its Redis connections is down, and logs the
  // outage once, through its own server's logger.
  redisLink.reportTo(app.log as unknown as Logger);
  const redisUp = options.redisUp ?? (() => redisLink.up);
  const redisCheck: ReadinessCheck = { name: 'redis_link', check: async () => redisUp() };
  app.get('/readyz', { config: PUBLIC_ROUTE }, async (_request, reply) => {
    const results = await Promise.all([redisCheck, ...checks()].map(runCheck));
    const ready = results.every((result) => result.ok);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks: results });
  });
  if (options.serveMetrics === false) return;
  app.get('/metrics', { config: PUBLIC_ROUTE }, async (_request, reply) => {
    const body = await registry.metrics();
    return reply.type(registry.contentType).send(body);
  });
}

/** Longest path parameter the router accepts; a longer one answers 414 in the one error shape. */
const MAX_PARAM_LENGTH_CHARS = 200;

/**
 * A Fastify server logging through `logger` under `component`. One line per request
 * (`request answered`: req_id, method, route template, status, duration_ms, tenant once
 * authenticated; probes and scrapes at debug) and its count once `registerOpsRoutes` gives the
 * registry; the request id is the caller's `x-request-id` when it is 1-128 visible ASCII
 * characters, else a new UUID, and is echoed in `x-request-id` on every answer. Fastify's own
 * per-request lines stay off, so there is exactly one.
 *
 * Default-deny from its first line: every route must be marked public (`PUBLIC_ROUTE`)
 * or `own`, or be covered by the credential given to `guardDoors`; a route that is neither stops
 * the server at start-up. Unknown paths answer 404 in the one error shape — after the credential,
 * on a guarded server. A server's own error handler ends in `sendFrameworkError`.
 */
export function createHttpServer(
  logger: Logger,
  component: string,
  bodyLimitBytes = 64 * 1024,
  /**
   * `refuseWhileRedisDown` (whether the server's own Redis answers): while it does not, every request but the
   * ops routes' is answered 503 `unavailable` at once, before the credential is read (which would
   * wait on Redis): a client learns of the outage in the time the link watch takes to see it.
   */
  options: { refuseWhileRedisDown?: () => boolean } = {},
): FastifyInstance {
  const doors = new Doors(bodyLimitBytes);
  const app = Fastify({
    loggerInstance: logger.child({ component }) as FastifyBaseLogger,
    bodyLimit: bodyLimitBytes,
    logController: new LogController({ disableRequestLogging: true, requestIdLogLabel: 'req_id' }),
    requestIdHeader: false,
    genReqId: (request) => requestIdOf(request.headers['x-request-id']),
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH_CHARS },
    frameworkErrors: loggingFrameworkErrors(component, doors.frameworkErrors),
    clientErrorHandler: answerClientError,
  });
  // Before the doors: a request they refuse still gets its id echoed and its line.
  installRequestLog(app, component);
  if (options.refuseWhileRedisDown) refuseWhileRedisDown(app, options.refuseWhileRedisDown);
  doors.install(app);
  app.setNotFoundHandler((request, reply) => reply.code(404).send(notFoundBody(request)));
  return app;
}

/** A Fastify server that serves only the ops routes, for roles with no HTTP of their own. */
export function createOpsServer(
  logger: Logger,
  registry: Registry,
  checks: () => ReadinessCheck[],
): FastifyInstance {
  const app = createHttpServer(logger, 'ops-http');
  app.setErrorHandler((error: Error, request, reply) => sendFrameworkError(error, request, reply, 64 * 1024));
  registerOpsRoutes(app, registry, checks);
  return app;
}

/** The routes that answer whatever Redis does: they tell the outage rather than meet it. */
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);

/**
 * Checked as a request arrives and again before each later stage that may wait on Redis (the rate
 * limit, the handler): a request that met the outage in one stage does not wait out a command
 * timeout in each of the next.
 */
function refuseWhileRedisDown(app: FastifyInstance, redisUp: () => boolean): void {
  const refuse = async (request: FastifyRequest, reply: FastifyReply) => {
    if (redisUp() || OPS_PATHS.has(request.url.split('?')[0] ?? '')) return;
    request.log.debug({ code: 'unavailable' }, 'request refused: Redis unavailable');
    return sendUnavailable(request, reply, unavailableBody());
  };
  for (const stage of ['onRequest', 'preValidation', 'preHandler'] as const) app.addHook(stage, refuse);
}
