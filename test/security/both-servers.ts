import { Redis } from 'ioredis';
import type { ApiHandle } from '../../apps/api/server.js';
import { startTestApi } from '../fixtures/api.js';
import { startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
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
  const api = await startTestApi(options.apiPrefix, options.env);
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
