import { Redis } from 'ioredis';
import { type ApiHandle, startApi } from '../../apps/api/server.js';
import { loadConfig } from '../../libs/config/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl } from '../fixtures/redis.js';

/**
 * Both servers a client can reach — the API and a browser worker's data plane — each under its own
 * prefix, with a raw Redis connection for the tests to read what they counted.
 */
export interface BothServers {
  api: ApiHandle;
  worker: TestBrowserWorker;
  redis: Redis;
  /** Deletes both prefixes' keys after closing both servers. */
  close(): Promise<void>;
}

/** Starts the API under `apiPrefix` and a browser worker under `dpPrefix`, both with `env` over their defaults. */
export async function startBothServers(options: {
  apiPrefix: string;
  dpPrefix: string;
  env?: Record<string, string>;
}): Promise<BothServers> {
  const api = await startApi({
    config: loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${options.apiPrefix}:`,
      QUEUE_PREFIX: options.apiPrefix,
      PORT: '0',
      LOG_LEVEL: 'silent',
      ...options.env,
    }),
    logger: silentLogger(),
    metrics: createMetrics({ role: 'api' }),
    redisUrl: testRedisUrl(),
  });
  let worker: TestBrowserWorker;
  try {
    worker = await startTestBrowserWorker({ prefix: options.dpPrefix, env: options.env });
  } catch (error) {
    await api.close();
    throw error;
  }
  const redis = new Redis(testRedisUrl());
  return {
    api,
    worker,
    redis,
    async close() {
      await api.close();
      await worker.handle.close();
      await deletePrefixedKeys(redis, options.apiPrefix);
      await deletePrefixedKeys(redis, options.dpPrefix);
      redis.disconnect();
    },
  };
}
