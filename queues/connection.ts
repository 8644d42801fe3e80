import { Cluster, type ClusterOptions, Redis, type RedisOptions } from 'ioredis';
import {
  duplicatesWithoutTimeout,
  type RedisClient,
  shareScriptsWithPipelines,
} from '../libs/store/redis-client.js';
import { VARIADIC_KEY_SCRIPTS } from '../libs/store/scripts.js';
import { redisLink } from '../libs/telemetry/redis-link.js';

export { isCluster, type RedisClient } from '../libs/store/redis-client.js';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** Where Redis is: one server's URL, or a cluster's seed nodes (redis:// URLs). */
export type RedisTarget = string | { readonly clusterNodes: readonly string[] };

/** The target a process's configuration names: the cluster, else REDIS_URL, else the local default. */
export function redisTarget(redis: {
  url: string | undefined;
  clusterNodes: readonly string[] | undefined;
}): RedisTarget {
  return redis.clusterNodes ? { clusterNodes: redis.clusterNodes } : (redis.url ?? DEFAULT_REDIS_URL);
}

/**
 * `worker`: for BullMQ workers and anything that must ride out a Redis restart — commands wait
 * for the reconnection (`maxRetriesPerRequest: null`, as BullMQ requires).
 * `producer`: for the API and other callers that must answer now — commands fail at once while
 * Redis is away (`enableOfflineQueue: false`) instead of piling up behind a request.
 * `subscriber`: a `worker` connection that also takes sharded subscriptions (SSUBSCRIBE); on a
 * cluster it keeps one more connection per master for them, so only the event streams' has it.
 */
export type ConnectionRole = 'worker' | 'producer' | 'subscriber';

const CONNECT_TIMEOUT_MS = 5_000;

/** The longest wait between two reconnection attempts: connections come back at most this far apart. */
export const MAX_RECONNECT_DELAY_MS = 2_000;

/**
 * A connection many callers share at once (the API's, a run worker's store) sends the
 * commands issued in one tick in one write (ioredis auto-pipelining): Redis still runs each
 * connection's commands in the order sent, and each caller still awaits its own reply. Never on a
 * connection that blocks (BullMQ's worker connections, a BLPOP's, a subscriber): a blocking
 * command would hold every command batched behind it.
 */
export interface ConnectionOptions {
  autoPipelining?: boolean;
}

/**
 * A connection's command timeout: the answer bound, and half of it for a `producer`. A shared
 * connection sends the commands issued while one batch is out in the next batch, after it
 * (ioredis auto-pipelining), so a request may wait out two timeouts: the API's then still
 * answers within one bound.
 */
export function commandTimeoutMs(role: ConnectionRole, answerTimeoutMs: number): number {
  return role === 'producer' ? Math.max(1, Math.ceil(answerTimeoutMs / 2)) : answerTimeoutMs;
}

/**
 * Every connection's ioredis settings, here and nowhere else. Each connection made here has a
 * command timeout ({@link commandTimeoutMs} of `redisLink.answerTimeoutMs`): a Redis that stops
 * answering without closing its connections (SIGSTOP, a partition without resets) fails a command
 * in that bound instead of holding its caller. A command that timed out may still run when Redis
 * answers again: the connection stays open and Redis reads what was sent, in order. The
 * connections that block (BullMQ's BZPOPMIN, a BLPOP) are duplicates without the timeout
 * (`duplicateUnbatched`, `duplicatesWithoutTimeout`); the link watch's pings judge them.
 */
export function redisOptions(
  role: ConnectionRole,
  name: string,
  options: ConnectionOptions = {},
): RedisOptions {
  const shared: RedisOptions = {
    connectionName: `leasehold:${name}`,
    ...(options.autoPipelining ? { enableAutoPipelining: true, autoPipeliningIgnoredCommands: [] } : {}),
    lazyConnect: true,
    connectTimeout: CONNECT_TIMEOUT_MS,
    commandTimeout: commandTimeoutMs(role, redisLink.answerTimeoutMs),
    retryStrategy: (times) => Math.min(times * 200, MAX_RECONNECT_DELAY_MS),
  };
  return role === 'producer'
    ? { ...shared, enableOfflineQueue: false, maxRetriesPerRequest: 1 }
    : { ...shared, maxRetriesPerRequest: null, enableReadyCheck: true };
}

/**
 * The same roles on a cluster. Every node connection gets the seed URLs' user and password (and
 * TLS for rediss://). Commands are auto-pipelined: those issued together are sent to each node in
 * one write, which is how requests about records of many runs (each its own slot) stay one round
 * trip per node.
 */
export function clusterOptions(role: ConnectionRole, name: string, nodes: readonly string[]): ClusterOptions {
  const { retryStrategy, enableOfflineQueue, ...perNode } = redisOptions(role, name);
  const credentials = nodes.map(nodeUrl).find((url) => url.username || url.password);
  const tls = nodes.some((node) => node.startsWith('rediss://'));
  return {
    lazyConnect: true,
    enableReadyCheck: true,
    enableAutoPipelining: true,
    autoPipeliningIgnoredCommands: [...VARIADIC_KEY_SCRIPTS],
    shardedSubscribers: role === 'subscriber',
    clusterRetryStrategy: retryStrategy ? (times: number) => retryStrategy(times) : undefined,
    ...(enableOfflineQueue === false ? { enableOfflineQueue: false } : {}),
    redisOptions: {
      ...perNode,
      ...(credentials?.username ? { username: decodeURIComponent(credentials.username) } : {}),
      ...(credentials?.password ? { password: decodeURIComponent(credentials.password) } : {}),
      ...(tls ? { tls: {} } : {}),
    },
  };
}

/** A node as REDIS_CLUSTER_NODES takes it (`host:port` or a URL), as a URL. */
function nodeUrl(node: string): URL {
  return new URL(/^rediss?:\/\//.test(node) ? node : `redis://${node}`);
}

function seedNodes(nodes: readonly string[]): Array<{ host: string; port: number }> {
  return nodes.map((node) => {
    const url = nodeUrl(node);
    return { host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) };
  });
}

/** A description of the target for messages: URLs without their passwords. */
export function describeTarget(target: RedisTarget): string {
  return typeof target === 'string'
    ? redactUrl(target)
    : `the Redis Cluster at ${target.clusterNodes.map(redactUrl).join(', ')}`;
}

/**
 * A connected ioredis client (a `Cluster` for a cluster target), or an error naming the target
 * (never its password) if Redis does not answer within the connect timeout.
 */
export async function connectRedis(
  url: string,
  role: ConnectionRole,
  name: string,
  options?: ConnectionOptions,
): Promise<Redis>;
export async function connectRedis(
  target: RedisTarget,
  role: ConnectionRole,
  name: string,
  options?: ConnectionOptions,
): Promise<RedisClient>;
export async function connectRedis(
  target: RedisTarget,
  role: ConnectionRole,
  name: string,
  options: ConnectionOptions = {},
): Promise<RedisClient> {
  const client: RedisClient =
    typeof target === 'string'
      ? new Redis(target, redisOptions(role, name, options))
      : new Cluster(seedNodes(target.clusterNodes), clusterOptions(role, name, target.clusterNodes));
  // Errors are reported by the commands that meet them, and an outage once by the process's link
  // watch; an unhandled 'error' event would crash.
  client.on('error', () => {});
  shareScriptsWithPipelines(client);
  duplicatesWithoutTimeout(client);
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
    const where = typeof target === 'string' ? `Redis at ${redactUrl(target)}` : describeTarget(target);
    throw new Error(`${where} did not answer: ${(error as Error).message}`, { cause: error });
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
export async function closeRedis(client: RedisClient): Promise<void> {
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
