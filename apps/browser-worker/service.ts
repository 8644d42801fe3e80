import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { launchChromium, resolveChromium } from '../../libs/browser/index.js';
import { type Config, decodeKey } from '../../libs/config/index.js';
import {
  type LeaseCaps,
  LeaseService,
  type LeaseStore,
  type PageFactory,
  PlaywrightPageFactory,
} from '../../libs/lease/index.js';
import { IntervalTask, StartupError } from '../../libs/lifecycle/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore } from '../../libs/store/index.js';
import {
  createHttpServer,
  createLeaseMetrics,
  FailedAuthLimiter,
  guardDoors,
  type Logger,
  type Metrics,
  type ReadinessCheck,
  registerOpsRoutes,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { registerDataPlaneRoutes } from './data-plane.js';

export interface BrowserWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
  /** Tests: a clock to cross lease caps without sleeping, and caps of their own. */
  clock?: () => number;
  caps?: LeaseCaps;
  /** Tests and benchmarks: another page factory over the launched browser. */
  pages?: (browser: Browser) => PageFactory;
}

export interface BrowserWorkerHandle {
  app: FastifyInstance;
  leases: LeaseService;
  store: LeaseStore;
  pages: PageFactory;
  browser: Browser;
  /** The Chromium binary this worker launched. */
  executablePath: string;
  /** The data-plane URL (http://host:port). */
  url: string;
  readiness(): ReadinessCheck[];
  close(): Promise<void>;
}

/** JSON body ceiling of the data plane (DESIGN §5). */
export const DATA_PLANE_BODY_LIMIT_BYTES = 64 * 1024;

/** Compares bearer tokens in constant time (hashing first makes the lengths equal). */
export function tokenMatches(presented: string, expected: string): boolean {
  const a = createHash('sha256').update(presented).digest();
  const b = createHash('sha256').update(expected).digest();
  return timingSafeEqual(a, b);
}

/**
 * The browser worker: owns Chromium and serves the authenticated data plane over it. Lease
 * routes (acquire, renew, close, navigate, observe, act) are built by the lease-service issue;
 * here are the process, the browser, authentication and health.
 */
export async function startBrowserWorker(options: BrowserWorkerOptions): Promise<BrowserWorkerHandle> {
  const { config, logger, metrics } = options;
  const token = config.secrets.dataPlaneToken;
  if (!token)
    throw new StartupError(
      'LEASEHOLD_DATA_PLANE_TOKEN is unset: set it to a secret of at least 32 characters shared with the run workers',
    );
  const sealKey = config.secrets.sealKey ? decodeKey(config.secrets.sealKey) : undefined;
  if (!sealKey)
    throw new StartupError(
      'LEASEHOLD_SEAL_KEY is unset: set it to 32 random bytes as hex or base64 (openssl rand -base64 32)',
    );
  const log = logger.child({ component: 'browser-worker', worker_id: config.browser.workerId });
  const chromium = resolveChromium(config.browser.executable);
  const browser = await launchChromium({
    executablePath: chromium.path,
    headless: config.browser.headless,
    sandbox: config.browser.sandbox,
  });
  log.info(
    { executable: chromium.path, source: chromium.source, version: browser.version() },
    'chromium launched',
  );

  let redis: Awaited<ReturnType<typeof connectRedis>>;
  try {
    redis = await connectRedis(options.redisUrl, 'worker', `browser-worker-${config.browser.workerId}`);
  } catch (error) {
    await browser.close();
    throw error;
  }

  const store = new RedisLeaseStore(redis, config.redis.keyPrefix);
  const pages = options.pages?.(browser) ?? new PlaywrightPageFactory(browser);
  const leases = new LeaseService({
    store,
    pages,
    workerId: config.browser.workerId,
    pinnedProfiles: config.browser.pinnedProfiles,
    sealKey,
    logger: log,
    metrics: createLeaseMetrics(metrics.registry),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.caps ? { caps: options.caps } : {}),
  });
  const revoked = await leases.revokeOrphans();
  if (revoked > 0) log.warn({ revoked }, 'revoked leases whose pages a previous run of this worker held');

  const app = createHttpServer(log, 'data-plane', DATA_PLANE_BODY_LIMIT_BYTES);
  // Issue 11.1: the token is demanded per route after routing (default-deny), never from the raw
  // URL, whose spelling the router forgives. Only the ops routes are public.
  guardDoors(app, {
    refusal: 'a valid data-plane token is required',
    challenge: 'Bearer',
    verify: async (request) => {
      const header = request.headers.authorization ?? '';
      const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : '';
      return presented.length > 0 && tokenMatches(presented, token);
    },
    failures: new FailedAuthLimiter(redis, config.redis.keyPrefix, config.http.authFailuresPerMinute),
  });
  registerDataPlaneRoutes(app, leases, store);
  app.get('/v1/worker', async () => ({
    id: config.browser.workerId,
    pinned_profiles: config.browser.pinnedProfiles,
    browser_version: browser.version(),
  }));

  const readiness = (): ReadinessCheck[] => [
    { name: 'browser_redis', check: async () => (await redis.ping()) === 'PONG' },
    { name: 'chromium', check: async () => browser.isConnected() },
  ];
  registerOpsRoutes(app, metrics.registry, readiness);

  let url: string;
  try {
    url = await app.listen({ host: config.http.host, port: config.http.browserWorkerPort });
  } catch (error) {
    await browser.close();
    await closeRedis(redis);
    throw error;
  }

  const registry = new BrowserWorkerRegistry(redis, config.redis.keyPrefix);
  const advertisedUrl = config.browser.workerUrl ?? url;
  const heartbeat = new IntervalTask(
    'browser-worker-heartbeat',
    config.browser.heartbeatMs,
    () =>
      registry.heartbeat(
        {
          id: config.browser.workerId,
          url: advertisedUrl,
          pinnedProfiles: config.browser.pinnedProfiles === '*' ? '*' : [...config.browser.pinnedProfiles],
        },
        Date.now(),
        config.browser.heartbeatMs * 3,
      ),
    log,
  );
  await heartbeat.runOnce();
  heartbeat.start();
  const expirySweep = new IntervalTask(
    'lease-expiry-sweep',
    config.browser.expirySweepIntervalMs,
    async () => {
      await leases.sweepExpired();
    },
    log,
  ).start();

  let closing: Promise<void> | undefined;
  return {
    app,
    leases,
    store,
    pages,
    browser,
    executablePath: chromium.path,
    url,
    readiness,
    close() {
      closing ??= (async () => {
        await heartbeat.close();
        await expirySweep.close();
        await registry.remove(config.browser.workerId).catch(() => undefined);
        await app.close();
        // Pages go with this process: their leases are revoked, unsealed, for the run side to see.
        await leases.shutdown();
        await browser.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
