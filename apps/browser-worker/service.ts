import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import type { Browser } from 'playwright-core';
import { launchChromium, resolveChromium } from '../../libs/browser/index.js';
import type { Config } from '../../libs/config/index.js';
import { StartupError } from '../../libs/lifecycle/index.js';
import {
  createHttpServer,
  type Logger,
  type Metrics,
  type ReadinessCheck,
  registerOpsRoutes,
} from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';

export interface BrowserWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
}

export interface BrowserWorkerHandle {
  app: FastifyInstance;
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

  const app = createHttpServer(log, 'data-plane', DATA_PLANE_BODY_LIMIT_BYTES);
  app.addHook('onRequest', async (request, reply) => {
    if (!request.url.startsWith('/v1/')) return;
    const header = request.headers.authorization ?? '';
    const presented = header.startsWith('Bearer ') ? header.slice('Bearer '.length) : '';
    if (!tokenMatches(presented, token))
      return reply
        .code(401)
        .send({ error: { code: 'unauthorized', message: 'a valid data-plane token is required' } });
  });
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

  let closing: Promise<void> | undefined;
  return {
    app,
    browser,
    executablePath: chromium.path,
    url,
    readiness,
    close() {
      closing ??= (async () => {
        await app.close();
        await browser.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}
