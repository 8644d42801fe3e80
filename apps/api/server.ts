import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { ApiError } from '../../libs/contracts/index.js';
import { releaseRunLease } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import {
  createHttpServer,
  errorBody,
  FailedAuthLimiter,
  guardDoors,
  type Logger,
  type Metrics,
  markDoor,
  type ReadinessCheck,
  RunEventStreams,
  registerOpsRoutes,
  sendFrameworkError,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis, createRunsQueue, RUNS_QUEUE } from '../../queues/index.js';
import { apiKeyDoors } from './auth.js';
import { registerDashboard } from './dashboard.js';
import { DefaultAgents } from './default-agent.js';
import { registerRateLimit } from './rate-limit.js';
import { registerAdminRoutes } from './routes-admin.js';
import { registerV1Routes } from './routes-v1.js';

export interface ApiOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
  /** Readiness of other roles sharing this process (the fleet). */
  extraReadiness?: () => ReadinessCheck[];
}

export interface ApiHandle {
  app: FastifyInstance;
  store: RunStore;
  /** http://host:port the API listens on. */
  url: string;
  close(): Promise<void>;
}

/** JSON body ceiling for REST (DESIGN §5 uses the same for the data plane). */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * The REST API: ops routes, OpenAPI at `/docs`, Bull Board at `/admin/queues`. Every error leaves
 * as `{error: {code, message}}` with a stable code; never a stack trace.
 */
export async function startApi(options: ApiOptions): Promise<ApiHandle> {
  const { config, logger, metrics } = options;
  // Issue 11.13: in production, no token and browser tools not switched off stops the start here.
  const browserTools = browserToolsState(config);
  const redis = await connectRedis(options.redisUrl, 'producer', 'api');
  const runsQueue = createRunsQueue(redis, config.redis.queuePrefix);
  const unwatch = metrics.watchQueue(RUNS_QUEUE, () => runsQueue.getJobCounts());

  const app = createHttpServer(logger, 'api', BODY_LIMIT_BYTES);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  app.setErrorHandler((error: FastifyError, request, reply) => {
    if (hasZodFastifySchemaValidationErrors(error)) {
      const first = error.validation[0];
      const field = first?.instancePath.replace(/^\//, '').replaceAll('/', '.') || error.validationContext;
      return reply.code(422).send(errorBody('validation_failed', `${field}: ${first?.message ?? 'invalid'}`));
    }
    if (error instanceof ApiError) return reply.code(error.status).send(errorBody(error.code, error.message));
    // Fastify's own errors (body size, JSON, content type) and anything unexpected: the one shape.
    return sendFrameworkError(error, request, reply, BODY_LIMIT_BYTES);
  });

  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'Leasehold REST API', version: '1.0.0' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    hideUntagged: true,
  });
  // The API document and its assets are public (issue 11.1): they describe routes, not records.
  await app.register(async (docs) => {
    markDoor(docs, 'public');
    await docs.register(fastifySwaggerUi, { routePrefix: '/docs' });
  });

  const store = new RunStore(redis, config.redis.keyPrefix);
  // Issue 11.1: default-deny. Every route needs a key unless marked; unknown paths (404, answered
  // by createHttpServer) and router errors too. The routes below still check their scopes.
  const authFailures = new FailedAuthLimiter(
    redis,
    config.redis.keyPrefix,
    config.http.authFailuresPerMinute,
  );
  guardDoors(app, apiKeyDoors(store, authFailures));

  await registerDashboard(app, { queue: runsQueue, store, authFailures });

  const profiles = new RedisLeaseStore(redis, config.redis.keyPrefix);
  const workers = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  const dataPlaneToken = config.secrets.dataPlaneToken;
  await registerRateLimit(app, redis, config);
  const eventSubscriber = await connectRedis(options.redisUrl, 'worker', 'api-events');
  const eventStreams = new RunEventStreams(
    eventSubscriber,
    store,
    { maxPerKey: config.api.eventStreamsPerKey, keepAliveMs: config.api.eventStreamKeepAliveMs },
    logger.child({ component: 'api' }),
  );
  registerV1Routes(app, {
    config,
    store,
    eventStreams,
    defaultAgents: new DefaultAgents(store, config),
    profiles,
    queue: runsQueue,
    releaseRunLease: async (runId) => {
      const run = await store.getRun(runId);
      if (!run || !dataPlaneToken) return;
      await releaseRunLease({ leases: profiles, workers, dataPlaneToken }, run).catch((error: unknown) =>
        logger.warn(
          { run_id: runId, err: error },
          'lease release on cancel failed; the upkeep will close it',
        ),
      );
    },
  });
  registerAdminRoutes(app, { store });

  registerOpsRoutes(app, metrics.registry, () => [
    { name: `browser_tools:${browserTools}`, check: async () => true },
    { name: 'redis', check: async () => (await redis.ping()) === 'PONG' },
    {
      name: 'runs_queue',
      check: async () => {
        await runsQueue.waitUntilReady();
        return true;
      },
    },
    ...(options.extraReadiness?.() ?? []),
  ]);

  const address = await app.listen({ host: config.http.host, port: config.http.apiPort });
  const url = address.replace('[::1]', 'localhost');
  logger.child({ component: 'api' })[browserTools === 'enabled' ? 'info' : 'warn'](browserToolsLine(config));
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    url,
    close() {
      closing ??= (async () => {
        unwatch();
        // Open streams first: a hijacked connection would keep the server from closing.
        await eventStreams.close();
        await closeRedis(eventSubscriber);
        await app.close();
        await runsQueue.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
