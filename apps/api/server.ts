import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import type { ChainableCommander } from 'ioredis';
import { type ArtifactStore, openArtifactStore } from '../../libs/artifacts/index.js';
import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { EgressGuard } from '../../libs/egress/index.js';
import { fleetLifecycle } from '../../libs/runtime/index.js';
import { LeasePageControl } from '../../libs/runtime/lease-page-control.js';
import {
  BrowserWorkerRegistry,
  ProfileSignIns,
  ProfileTurns,
  RedisLeaseStore,
  RunStore,
  ScheduleStore,
  UiSessions,
} from '../../libs/store/index.js';
import { WebhookStore } from '../../libs/store/webhooks.js';
import {
  AddressBudget,
  FailedAuthLimiter,
  guardDoors,
  type Logger,
  logTenantOf,
  type Metrics,
  type ReadinessCheck,
  RunEventStreams,
  registerOpsRoutes,
} from '../../libs/telemetry/index.js';
import { redisLink } from '../../libs/telemetry/redis-link.js';
import {
  addRunJobTo,
  closeRedis,
  connectRedis,
  createRunsQueue,
  type RedisTarget,
  RUNS_QUEUE,
} from '../../queues/index.js';
import { createSchedulesQueue } from '../../queues/schedules.js';
import { apiKeyDoors } from './auth.js';
import { registerDashboard } from './dashboard.js';
import { DefaultAgents } from './default-agent.js';
import { registerMcp } from './mcp/server.js';
import { registerRunPages } from './pages/index.js';
import { ApiOrigins } from './public-origin.js';
import { registerRateLimit } from './rate-limit.js';
import { createRestServer } from './rest-server.js';
import { registerV1Routes } from './routes/index.js';

export { BODY_LIMIT_BYTES } from './rest-server.js';

export interface ApiOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
  /** Readiness of other roles sharing this process (the fleet). */
  extraReadiness?: () => ReadinessCheck[];
  /** The store run artifacts are read from; unset: opened from config (the fleet shares one). */
  artifacts?: ArtifactStore;
}

export interface ApiHandle {
  app: FastifyInstance;
  store: RunStore;
  /** http://host:port the API listens on. */
  url: string;
  close(): Promise<void>;
}

/**
 * The REST API: ops routes, OpenAPI at `/docs`, Bull Board at `/admin/queues`. Every error leaves
 * as `{error: {code, message}}` with a stable code; never a stack trace.
 */
export async function startApi(options: ApiOptions): Promise<ApiHandle> {
  const { config, logger, metrics } = options;
  // In production, no token and browser tools not switched off stops the start here.
  const browserTools = browserToolsState(config);
  // A store that cannot be opened (no folder, no bucket) stops the start here.
  const artifacts = options.artifacts ?? (await openArtifactStore(config));
  redisLink.configure(config.redis.answerTimeoutMs);
  const redis = await connectRedis(options.redisUrl, 'producer', 'api', { autoPipelining: true });
  const runsQueue = createRunsQueue(redis, config.redis.queuePrefix);
  const schedulesQueue = createSchedulesQueue(redis, config.redis.queuePrefix);
  const unwatch = metrics.watchQueue(RUNS_QUEUE, () => runsQueue.getJobCounts());

  // The API answers 503 while its own connections do not answer (the event subscriber's joins below).
  const own: object[] = [redis];
  const apiRedis = redisLink.of(own);
  const app = await createRestServer(logger, () => apiRedis.up);

  const store = new RunStore(redis, config.redis.keyPrefix, { retentionMs: config.runRetentionMs });
  // Default-deny. Every route needs a key unless marked; unknown paths (404, answered
  // by createHttpServer) and router errors too. The routes below still check their scopes.
  const authFailures = new FailedAuthLimiter(
    redis,
    config.redis.keyPrefix,
    config.http.authFailuresPerMinute,
  );
  // The run pages' sessions; their cookie also opens the /v1 routes the pages' script calls.
  const uiSessions = new UiSessions(redis, config.redis.keyPrefix, {
    maxPerKey: config.api.uiSessionsPerKey,
  });
  guardDoors(app, apiKeyDoors(store, authFailures, uiSessions));
  // Each request's line names the tenant its key or run-page session was let in as.
  logTenantOf(app, (request) => request.identity?.tenant);

  await registerDashboard(app, { queue: runsQueue, store, authFailures });
  // The origins a browser shows the API under: the sign-in form must come from one of them.
  const origins = new ApiOrigins(config);
  await registerRunPages(app, {
    sessions: uiSessions,
    failures: authFailures,
    signIns: new AddressBudget(redis, config.redis.keyPrefix, 'signins', config.api.signInsPerMinute),
    origins,
    store,
    signInLeaseMs: config.api.profileSignInLeaseMs,
  });

  const profiles = new RedisLeaseStore(redis, config.redis.keyPrefix);
  // One lifecycle: every consequence of a transition a route causes goes through it.
  const lifecycle = fleetLifecycle({
    redis,
    keyPrefix: config.redis.keyPrefix,
    store,
    queue: runsQueue,
    dataPlaneToken: config.secrets.dataPlaneToken,
    runEnded: (end) => metrics.runEnded(end),
    onError: (runId, error, what) => logger.warn({ run_id: runId, err: error }, what),
  });
  await registerRateLimit(app, redis, config);
  const eventSubscriber = await connectRedis(options.redisUrl, 'subscriber', 'api-events');
  own.push(eventSubscriber);
  const eventStreams = new RunEventStreams(
    eventSubscriber,
    store,
    { maxPerKey: config.api.eventStreamsPerKey, keepAliveMs: config.api.eventStreamKeepAliveMs },
    logger.child({ component: 'api' }),
  );
  const defaultAgents = new DefaultAgents(store, config);
  const webhooks = new WebhookStore(redis, config.redis.keyPrefix);
  // DESIGN §12: profiles' literal origins are judged at creation by the one address guard.
  const egress = new EgressGuard(config.egress);
  const workers = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  const v1 = {
    config,
    egress,
    store,
    profiles,
    defaultAgents,
    eventStreams,
    lifecycle,
    // A new run's first job goes in the round trip that stores the run (one connection).
    addFirstJob: (batch: ChainableCommander, run: { id: string; tenant: string; session_id: string }) =>
      addRunJobTo(runsQueue, batch, run),
    webhooks,
    artifacts,
    metrics,
    schedules: { store: new ScheduleStore(redis, config.redis.keyPrefix), queue: schedulesQueue },
    // The run's principal takes its page over and hands it back through the data plane.
    pageControl: new LeasePageControl({
      leases: profiles,
      registry: new BrowserWorkerRegistry(redis, config.redis.keyPrefix),
      token: config.secrets.dataPlaneToken,
    }),
    live: {
      relay: {
        leases: profiles,
        workers,
        dataPlaneToken: config.secrets.dataPlaneToken,
      },
      sessions: uiSessions,
      origins,
    },
    profileSignIns: {
      records: new ProfileSignIns(redis, config.redis.keyPrefix),
      turns: new ProfileTurns(redis, config.redis.keyPrefix),
      workers,
      leaseMs: config.api.profileSignInLeaseMs,
    },
  };
  registerV1Routes(app, v1);
  // The MCP server at /mcp, its tools calling the routes above as their caller.
  const mcp = await registerMcp(app, {
    store,
    redis,
    deps: v1,
    keyPrefix: config.redis.keyPrefix,
    places: { perTenant: config.api.mcpSessionsPerTenant, perKey: config.api.mcpSessionsPerKey },
  });

  registerOpsRoutes(
    app,
    metrics.registry,
    () => [
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
    ],
    { redisUp: () => apiRedis.up },
  );

  const address = await app.listen({ host: config.http.host, port: config.http.apiPort });
  origins.listening(Number(new URL(address).port));
  egress.refusePort((app.server.address() as AddressInfo).port);
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
        // Open streams (events, MCP sessions) first: a hijacked connection would keep the server from closing.
        await eventStreams.close();
        await mcp.close();
        await closeRedis(eventSubscriber);
        await app.close();
        await runsQueue.close();
        await schedulesQueue.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
