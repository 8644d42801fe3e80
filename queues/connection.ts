import { Redis, type RedisOptions } from 'ioredis';
import { redisLink } from '../libs/telemetry/redis-link.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/**
 * `worker`: for BullMQ workers and anything that must ride out a Redis restart — commands wait
 * for the reconnection (`maxRetriesPerRequest: null`, as BullMQ requires).
 * `producer`: for the API and other callers that must answer now — commands fail at once while
 * Redis is away (`enableOfflineQueue: false`) instead of piling up behind a request.
 */
export type ConnectionRole = 'worker' | 'producer';

const CONNECT_TIMEOUT_MS = 5_000;

export function redisOptions(role: ConnectionRole, name: string): RedisOptions {
  const shared: RedisOptions = {
    connectionName: `leasehold:${name}`,
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    retryStrategy: (times) => Math.min(times * 200, 2_000),
  };
  return role === 'worker'
    ? { ...shared, maxRetriesPerRequest: null, enableReadyCheck: true }
    : { ...shared, enableOfflineQueue: false, maxRetriesPerRequest: 1 };
}

/**
 * A connected ioredis client, or an error naming the URL (never its password) if Redis does not
 * answer within the connect timeout.
 */
export async function connectRedis(url: string, role: ConnectionRole, name: string): Promise<Redis> {
  const client = new Redis(url, redisOptions(role, name));
  // Errors are reported by the commands that meet them, and an outage once by the process's link
  // watch (issue 12); an unhandled 'error' event would crash.
  client.on('error', () => {});
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      client.connect(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), CONNECT_TIMEOUT_MS);
      }),
    ]);
    redisLink.watch(client, name);
    return client;
  } catch (error) {
    client.disconnect();
    throw new Error(`Redis at ${redactUrl(url)} did not answer: ${(error as Error).message}`, {
      cause: error,
    });
  } finally {
    clearTimeout(timer);
  }
}

/** Whether a Redis answers PING at `url` within `timeoutMs`. */
export async function redisAnswers(url: string, timeoutMs = 1_000): Promise<boolean> {
  const client = new Redis(url, {
    lazyConnect: true,
    connectTimeout: timeoutMs,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  client.on('error', () => {});
  try {
    await client.connect();
    return (await client.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    client.disconnect();
  }
}

/** Closes a client politely (QUIT), falling back to a hard disconnect. */
export async function closeRedis(client: Redis): Promise<void> {
  if (client.status === 'end') return;
  try {
    await client.quit();
  } catch {
    client.disconnect();
  }
}

export function redactUrl(url: string): string {
  return url.replace(/\/\/[^@/]*@/, '//***@');
}
