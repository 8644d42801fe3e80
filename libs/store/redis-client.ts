import { type Cluster, type ClusterOptions, Pipeline, type Redis } from 'ioredis';

/**
 * A connection to Leasehold's Redis: one server, or a Redis Cluster. Both answer the
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
 * A new connection like `client`, never auto-pipelined (a shared connection batches each
 * tick's commands; one that blocks or subscribes must not) and without a command timeout: a
 * BLPOP or BZPOPMIN waits longer than any timeout by design, so such a connection is judged by
 * the liveness pings of the process's other connections instead. A cluster's keeps its other options.
 */
export function duplicateUnbatched(client: RedisClient): RedisClient {
  const duplicate = isCluster(client)
    ? client.duplicate(undefined, { redisOptions: withoutTimeout(client.options.redisOptions) })
    : client.duplicate({ enableAutoPipelining: false, commandTimeout: undefined });
  shareScriptsWithPipelines(duplicate);
  return duplicate;
}

/**
 * Makes every later duplicate of `client` one without its command timeout: BullMQ makes a
 * worker's blocking connection (BZPOPMIN) as a duplicate of the connection it is given.
 */
export function duplicatesWithoutTimeout(client: RedisClient): void {
  if (isCluster(client)) {
    const duplicate = client.duplicate.bind(client);
    client.duplicate = (nodes, options?: ClusterOptions) =>
      duplicate(nodes, {
        ...options,
        redisOptions: withoutTimeout(options?.redisOptions ?? client.options.redisOptions),
      });
    return;
  }
  const duplicate = client.duplicate.bind(client);
  client.duplicate = (options = {}) => duplicate({ ...options, commandTimeout: undefined });
}

function withoutTimeout<T extends { commandTimeout?: number }>(options: T | undefined): T {
  return { ...(options ?? ({} as T)), commandTimeout: undefined };
}

/** The parts of an ioredis client (or cluster) that hold and hand out its scripts. */
interface ScriptHolder {
  scriptsSet: Record<string, unknown>;
  defineCommand(name: string, definition: { lua: string; numberOfKeys?: number }): void;
  pipeline(...args: unknown[]): unknown;
  multi(...args: unknown[]): unknown;
  [method: string]: unknown;
}

const sharing = new WeakSet<object>();

/**
 * Ioredis copies each script defined on a client onto every pipeline and transaction it
 * makes (two properties a script), and an auto-pipelined connection makes one a tick. With
 * BullMQ's scripts and the store's on one connection that copy cost 0.15–0.37 ms a pipeline, most
 * of making one. Here the client's scripts live on one prototype its pipelines share: each
 * pipeline or transaction the client makes gets it, and a script defined later (BullMQ defines its
 * own when its queue first connects) joins it. The client's `scriptsSet` keeps every script by
 * name, not enumerable. A pipeline still runs a script as before (EVALSHA, loading it on the
 * connection first): ioredis reads the copies only to call them.
 */
export function shareScriptsWithPipelines(client: RedisClient): void {
  if (sharing.has(client)) return;
  sharing.add(client);
  const holder = client as unknown as ScriptHolder;
  const shared = Object.create(Pipeline.prototype) as Record<string, unknown>;
  const share = (name: string) => {
    shared[name] = holder[name];
    shared[`${name}Buffer`] = holder[`${name}Buffer`];
    // Kept, by name, but out of the pipeline constructor's `Object.keys` walk.
    Object.defineProperty(holder.scriptsSet, name, { enumerable: false });
  };
  for (const name of Object.keys(holder.scriptsSet)) share(name);
  const define = holder.defineCommand;
  holder.defineCommand = function (this: ScriptHolder, name, definition) {
    define.call(this, name, definition);
    share(name);
  };
  for (const make of ['pipeline', 'multi'] as const) {
    const original = holder[make];
    holder[make] = function (this: ScriptHolder, ...args: unknown[]) {
      const made = original.apply(this, args);
      // `multi({ pipeline: false })` is the MULTI command itself: a promise, not a pipeline.
      if (made instanceof Pipeline) Object.setPrototypeOf(made, shared);
      return made;
    };
  }
}
