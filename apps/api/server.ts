import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import fastifySwagger from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyError, FastifyInstance } from 'fastify';
import {
  hasZodFastifySchemaValidationErrors,
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
} from 'fastify-type-provider-zod';
import type { Config } from '../../libs/config/index.js';
import { API_ERROR_STATUS, ApiError, type ApiErrorBody } from '../../libs/contracts/index.js';
import { releaseRunLease } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import type { Logger, Metrics, ReadinessCheck } from '../../libs/telemetry/index.js';
import { createHttpServer, registerOpsRoutes } from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis, createRunsQueue, RUNS_QUEUE } from '../../queues/index.js';
import { dashboardGate } from './auth.js';
import { DefaultAgents } from './default-agent.js';
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

function errorBody(code: string, message: string): ApiErrorBody {
  return { error: { code, message } };
}

/**
 * The REST API: ops routes, OpenAPI at `/docs`, Bull Board at `/admin/queues`. Every error leaves
 * as `{error: {code, message}}` with a stable code; never a stack trace.
 */
export async function startApi(options: ApiOptions): Promise<ApiHandle> {
  const { config, logger, metrics } = options;
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
    if (error.code === 'FST_ERR_CTP_BODY_TOO_LARGE')
      return reply.code(413).send(errorBody('payload_too_large', `body over ${BODY_LIMIT_BYTES} bytes`));
    const status = error.statusCode ?? 500;
    if (status >= 400 && status < 500) {
      const code =
        (Object.entries(API_ERROR_STATUS).find(([, value]) => value === status)?.[0] as string) ??
        'bad_request';
      return reply.code(status).send(errorBody(code, error.message));
    }
    request.log.error({ err: error }, 'request failed');
    return reply.code(500).send(errorBody('internal', 'internal error'));
  });
  app.setNotFoundHandler((request, reply) =>
    reply.code(404).send(errorBody('not_found', `no route ${request.method} ${request.url.split('?')[0]}`)),
  );

  await app.register(fastifySwagger, {
    openapi: {
      info: { title: 'Leasehold REST API', version: '1.0.0' },
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } } },
      security: [{ bearer: [] }],
    },
    transform: jsonSchemaTransform,
    hideUntagged: true,
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs' });

  const store = new RunStore(redis, config.redis.keyPrefix);

  // Read-only: the dashboard shows the queue; runs change only through the REST API. Behind the
  // admin scope, with the key as a Bearer token or as a browser's Basic password.
  const board = new FastifyAdapter();
  createBullBoard({
    queues: [new BullMQAdapter(runsQueue, { readOnlyMode: true })],
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'Leasehold' } },
  });
  board.setBasePath('/admin/queues');
  await app.register(async (dashboard) => {
    dashboard.addHook('onRequest', dashboardGate(store));
    await dashboard.register(board.registerPlugin(), { prefix: '/admin/queues' });
  });

  const profiles = new RedisLeaseStore(redis, config.redis.keyPrefix);
  const workers = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  const dataPlaneToken = config.secrets.dataPlaneToken;
  registerV1Routes(app, {
    config,
    store,
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
  let closing: Promise<void> | undefined;
  return {
    app,
    store,
    url,
    close() {
      closing ??= (async () => {
        unwatch();
        await app.close();
        await runsQueue.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
