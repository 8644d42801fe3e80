import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { type ArtifactStore, openArtifactStore } from '../../libs/artifacts/index.js';
import type { Config } from '../../libs/config/index.js';
import { withOverrides } from '../../libs/config/index.js';
import { Shutdown } from '../../libs/shutdown/index.js';
import type { RunStore } from '../../libs/store/index.js';
import { createMetrics, type Logger, type Metrics, unserved } from '../../libs/telemetry/index.js';
import { DEFAULT_REDIS_URL, describeTarget, type RedisTarget, redisAnswers } from '../../queues/index.js';
import { startApi } from '../api/server.js';
import type { BrowserWorkerHandle } from '../browser-worker/handle.js';
import { startBrowserWorker } from '../browser-worker/service.js';
import { startRunWorker } from '../run-worker/run-worker.js';
import { startSweeper } from '../sweeper/sweeper.js';
import { startPrivateRedis } from './private-redis.js';

export interface FleetOptions {
  config: Config;
  logger: Logger;
  metrics?: Metrics;
  /** Where a local Redis is looked for when REDIS_URL is unset (tests point it elsewhere). */
  localRedisUrl?: string;
  /** Test-only: the run worker's execution fault hook (see `ExecutionDeps.faults`). */
  faults?: Parameters<typeof startRunWorker>[0]['faults'];
}

export interface FleetHandle {
  config: Config;
  metrics: Metrics;
  urls: {
    api: string;
    /** The runs page: sign in with the API key below. */
    runs: string;
    docs: string;
    dashboard: string;
    metrics: string;
    browserWorker: string;
    redis: string;
  };
  /**
   * The roles' own handles, so a test can stop one (a run worker) and keep the others, and read the
   * routes each HTTP server serves.
   */
  roles: {
    runWorker: { close(): Promise<void> };
    api: { app: FastifyInstance };
    /** Its warm pool too: a test waits for a warm context before it changes the profile. */
    browserWorker: Pick<BrowserWorkerHandle, 'app' | 'warmPool'>;
  };
  /** The run store the API writes (tests make keys of other tenants with it). */
  store: RunStore;
  /** The one artifact store every role writes, reads and sweeps. */
  artifacts: ArtifactStore;
  /** An API key of tenant `dev` with every scope, made at start for this machine's user. */
  apiKey: string;
  /** A fleet operator key, made at start: it opens the dashboard and no tenant's records. */
  operatorKey: string;
  redisSource: 'REDIS_CLUSTER_NODES' | 'REDIS_URL' | 'local' | 'private';
  chromium: string;
  /** Stops every role in order (idempotent): claims first, the browser and Redis last. */
  close(): Promise<void>;
}

/**
 * Redis from REDIS_CLUSTER_NODES or REDIS_URL, else 127.0.0.1:6379 if it answers, else a private
 * redis-server child (always one node).
 */
async function resolveRedis(
  config: Config,
  localUrl: string,
  shutdown: Shutdown,
): Promise<{ url: RedisTarget; source: FleetHandle['redisSource'] }> {
  if (config.redis.clusterNodes)
    return { url: { clusterNodes: config.redis.clusterNodes }, source: 'REDIS_CLUSTER_NODES' };
  if (config.redis.url) return { url: config.redis.url, source: 'REDIS_URL' };
  if (await redisAnswers(localUrl)) return { url: localUrl, source: 'local' };
  const redis = await startPrivateRedis();
  shutdown.add('private-redis', () => redis.stop());
  return { url: redis.url, source: 'private' };
}

/**
 * Every role in one process — the API, one browser worker, one run worker and the sweeper —
 * sharing one metrics registry, served only at the API's `/metrics` (the browser worker's answers
 * 404; the run worker and the sweeper start no server here), so each series is scraped once. Secrets left unset are
 * made up for this process alone (its roles share them in memory).
 */
export async function startFleet(options: FleetOptions): Promise<FleetHandle> {
  const { logger } = options;
  const metrics = options.metrics ?? createMetrics({ role: 'fleet' });
  const shutdown = new Shutdown(logger);
  try {
    const redis = await resolveRedis(options.config, options.localRedisUrl ?? DEFAULT_REDIS_URL, shutdown);
    const config = withOverrides(options.config, {
      secrets: {
        dataPlaneToken: options.config.secrets.dataPlaneToken ?? randomBytes(32).toString('base64url'),
        sealKey: options.config.secrets.sealKey ?? randomBytes(32).toString('base64'),
      },
    });
    const roleOptions = { config, logger, metrics, redisUrl: redis.url };
    // Opened once and handed to each role, so the screenshots the browser worker writes
    // are the ones the API serves and the sweeper expires.
    const artifacts = await openArtifactStore(config);

    // The roles share one registry, served once, by the API: the browser worker's
    // data plane answers /metrics 404, so no series is scraped twice.
    const browserWorker = await startBrowserWorker({ ...roleOptions, metrics: unserved(metrics), artifacts });
    shutdown.add('browser-worker', () => browserWorker.close());
    const runWorker = await startRunWorker({
      ...roleOptions,
      ...(options.faults ? { faults: options.faults } : {}),
    });
    shutdown.add('run-worker', () => runWorker.close());
    const sweeper = await startSweeper({ ...roleOptions, artifacts });
    shutdown.add('sweeper', () => sweeper.close());
    const api = await startApi({
      ...roleOptions,
      artifacts,
      extraReadiness: () => [...browserWorker.readiness(), ...runWorker.readiness(), ...sweeper.readiness()],
    });
    shutdown.add('api', () => api.close());
    // DESIGN §12: the API's port, chosen now when PORT=0, is one of the fleet's own.
    browserWorker.egress.refusePort((api.app.server.address() as AddressInfo).port);
    // A key for this machine's user, shown once on start (only its hash is stored).
    const { key: apiKey } = await api.store.createApiKey({
      tenant: 'dev',
      principal: 'dev',
      scopes: ['admin', 'runs:write', 'runs:read', 'approvals:write'],
    });
    const { key: operatorKey } = await api.store.createApiKey({
      tenant: '_fleet',
      principal: 'dev',
      scopes: ['operator'],
    });

    return {
      config,
      metrics,
      urls: {
        api: `${api.url}/v1`,
        runs: `${api.url}/runs`,
        docs: `${api.url}/docs`,
        dashboard: `${api.url}/admin/queues`,
        metrics: `${api.url}/metrics`,
        browserWorker: browserWorker.url,
        redis: describeTarget(redis.url),
      },
      apiKey,
      operatorKey,
      store: api.store,
      artifacts,
      roles: { runWorker, api, browserWorker },
      redisSource: redis.source,
      chromium: browserWorker.executablePath,
      close: () => shutdown.close(),
    };
  } catch (error) {
    await shutdown.close();
    throw error;
  }
}
