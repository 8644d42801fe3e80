import type { ChainableCommander } from 'ioredis';
import { isCluster, type RedisClient } from './redis-client.js';

/**
 * A pipeline for commands whose keys lie in different slots: the records of many runs, sessions or
 * profiles, or an index beside a record.
 *
 * On one Redis it is the client's own pipeline: one round trip, run in the order given. On a
 * cluster an ioredis pipeline must keep to one node, so each command is sent on its own, all in
 * the same tick: the cluster connection's auto-pipelining (queues/connection.ts) writes those
 * bound for one node together — one round trip per node — and `exec` answers the replies in the
 * order given, as a pipeline does. Commands bound for different nodes are not ordered among
 * themselves: a caller whose write must land before another's (an index entry before its record)
 * execs the first batch before it sends the second, as a pipeline never promised more than that
 * on a cluster anyway.
 */
export function slotBatch(redis: RedisClient): ChainableCommander {
  if (!isCluster(redis)) return redis.pipeline();
  const queued: Array<() => Promise<unknown>> = [];
  const send = redis as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>;
  const batch: ChainableCommander = new Proxy({} as ChainableCommander, {
    get(_target, property) {
      // Not a thenable: `await batch` must not call anything.
      if (typeof property !== 'string' || property === 'then') return undefined;
      if (property === 'length') return queued.length;
      if (property === 'exec')
        return async (): Promise<Array<[Error | null, unknown]>> => {
          const sent = queued.splice(0).map((command) =>
            command().then(
              (reply): [Error | null, unknown] => [null, reply],
              (error: Error): [Error | null, unknown] => [error, null],
            ),
          );
          return Promise.all(sent);
        };
      const command = send[property];
      if (typeof command !== 'function') throw new TypeError(`slotBatch: ${property} is not a command`);
      return (...args: unknown[]) => {
        queued.push(() => command.apply(redis, args));
        return batch;
      };
    },
  });
  return batch;
}
