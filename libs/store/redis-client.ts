import type { Cluster, Redis } from 'ioredis';

/**
 * A connection to Leasehold's Redis: one server, or a Redis Cluster (issue 15). Both answer the
 * same commands; what differs is kept in few places: a pipeline over records of different runs,
 * sessions or profiles must go through {@link slotBatch} (a cluster pipeline must stay on one
 * node), and sharded subscriptions need a `subscriber` connection (queues/connection.ts).
 */
export type RedisClient = Redis | Cluster;

/** Whether `client` is a cluster connection. */
export function isCluster(client: RedisClient): client is Cluster {
  return (client as Partial<Cluster>).isCluster === true;
}

/**
 * A new connection like `client`, never auto-pipelined (issue 18: a shared connection batches each
 * tick's commands; one that blocks or subscribes must not). A cluster's keeps its own options.
 */
export function duplicateUnbatched(client: RedisClient): RedisClient {
  return isCluster(client) ? client.duplicate() : client.duplicate({ enableAutoPipelining: false });
}
