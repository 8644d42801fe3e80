import { duplicateUnbatched, type RedisClient } from '../store/redis-client.js';
import type { Logger } from '../telemetry/index.js';
import { isRedisUnreachable, redisLink } from '../telemetry/redis-link.js';

/** The cancels this process heard, and the subscription that hears them. */
export interface CancelListener {
  /** Run ids whose cancel was published; an execution drops its entry when it ends. */
  heard: Set<string>;
  close(): void;
}

/**
 * DESIGN §4.7: a cancel of a running run is told through pub/sub, wherever the run runs; the
 * loop also reads the store's flag before every call, so a missed message delays nothing long.
 */
export async function listenForCancels(
  redis: RedisClient,
  channel: string,
  log: Logger,
): Promise<CancelListener> {
  const heard = new Set<string>();
  // A subscriber sends nothing but its subscriptions: never batched (queues/connection.ts).
  const subscriber = duplicateUnbatched(redis);
  // An outage is logged once by the process's link watch, which follows this one too.
  subscriber.on('error', (error) => {
    if (!isRedisUnreachable(error)) log.warn({ err: error }, 'cancel subscription error');
  });
  redisLink.watch(subscriber, 'run-worker-cancels');
  subscriber.on('message', (_channel, runId: string) => heard.add(runId));
  await subscriber.subscribe(channel);
  return { heard, close: () => subscriber.disconnect() };
}
