import Fastify, { type FastifyBaseLogger, type FastifyInstance, LogController } from 'fastify';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';

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
): void {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const results = await Promise.all(checks().map(runCheck));
    const ready = results.every((result) => result.ok);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not_ready', checks: results });
  });
  app.get('/metrics', async (_request, reply) => {
    const body = await registry.metrics();
    return reply.type(registry.contentType).send(body);
  });
}

/**
 * A Fastify server logging through `logger` under `component`. Requests are not logged one by
 * one (metrics count them); errors are.
 */
export function createHttpServer(
  logger: Logger,
  component: string,
  bodyLimitBytes = 64 * 1024,
): FastifyInstance {
  return Fastify({
    loggerInstance: logger.child({ component }) as FastifyBaseLogger,
    bodyLimit: bodyLimitBytes,
    logController: new LogController({ disableRequestLogging: true }),
  });
}

/** A Fastify server that serves only the ops routes, for roles with no HTTP of their own. */
export function createOpsServer(
  logger: Logger,
  registry: Registry,
  checks: () => ReadinessCheck[],
): FastifyInstance {
  const app = createHttpServer(logger, 'ops-http');
  registerOpsRoutes(app, registry, checks);
  return app;
}
