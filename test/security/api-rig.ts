import type { Redis } from 'ioredis';
import type { ApiHandle } from '../../apps/api/server.js';
import type { ApiKeyScope } from '../../libs/contracts/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import type { RestAnswer } from '../fixtures/rest.js';

/**
 * The API alone (no browser worker, no run worker) on a free port, under its own key and queue
 * prefix, with a raw Redis connection for the tests to count what was written.
 */
export interface ApiRig {
  api: ApiHandle;
  redis: Redis;
  prefix: string;
  /** A key of `tenant` for `principal` with `scopes`. */
  key(tenant: string, principal: string, scopes: ApiKeyScope[]): Promise<string>;
  call(
    method: string,
    path: string,
    options?: { key?: string; body?: unknown; raw?: string; headers?: Record<string, string> },
  ): Promise<RestAnswer & { headers: Headers }>;
  /** Every key under the rig's prefix (Leasehold's records and BullMQ's). */
  storedKeys(): Promise<string[]>;
  close(): Promise<void>;
}

/** With `sharedPrefix`, a second replica over the same records and queue as another rig. */
export async function startApiRig(
  label: string,
  env: Record<string, string> = {},
  sharedPrefix?: string,
): Promise<ApiRig> {
  const prefix = sharedPrefix ?? uniquePrefix(label);
  const api = await startTestApi(prefix, env);
  const redis = await connectRedis(testRedisUrl(), 'worker', `test-${label}`);
  return {
    api,
    redis,
    prefix,
    async key(tenant, principal, scopes) {
      return (await api.store.createApiKey({ tenant, principal, scopes })).key;
    },
    async call(method, path, options = {}) {
      const hasBody = options.body !== undefined || options.raw !== undefined;
      const response = await fetch(`${api.url}${path}`, {
        method,
        headers: {
          ...(options.key ? { authorization: `Bearer ${options.key}` } : {}),
          ...(hasBody ? { 'content-type': 'application/json' } : {}),
          ...options.headers,
        },
        ...(hasBody ? { body: options.raw ?? JSON.stringify(options.body) } : {}),
        signal: AbortSignal.timeout(10_000),
      });
      const text = await response.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = text;
      }
      return { status: response.status, body, headers: response.headers };
    },
    async storedKeys() {
      return (await redis.keys(`${prefix}:*`)).sort();
    },
    async close() {
      await api.close();
      // A replica leaves the records to the rig that owns the prefix.
      if (sharedPrefix === undefined) await deletePrefixedKeys(redis, prefix);
      await closeRedis(redis);
    },
  };
}

/** JSON text of `depth` nested arrays around a number, built without recursion. */
export function nestedJson(depth: number): string {
  return `${'['.repeat(depth)}1${']'.repeat(depth)}`;
}
