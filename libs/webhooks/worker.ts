import type { Worker } from 'bullmq';
import type { RedisTarget } from '../../queues/connection.js';
import { WEBHOOKS_QUEUE, type WebhookJob, type WebhookJobResult } from '../../queues/webhooks.js';
import { createQueueWorker } from '../../queues/worker.js';
import type { Config } from '../config/index.js';
import type { RedisClient } from '../store/redis-client.js';
import { WebhookStore } from '../store/webhooks.js';
import type { Logger } from '../telemetry/index.js';
import { type WebhookDeliveryDeps, webhookDeliveryProcessor } from './delivery.js';

export interface WebhookWorkerOptions {
  config: Config;
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
  /** The store's connection (any role); the worker takes one of its own for the queue. */
  redis: RedisClient;
  logger: Logger;
  /** Deliveries at once (default 8: each mostly waits on a receiver). */
  concurrency?: number;
  /** Test-only: a shorter answer deadline, a moved clock. */
  delivery?: Pick<WebhookDeliveryDeps, 'timeoutMs' | 'clock'>;
}

/**
 * The webhook deliveries' worker, hosted by each run worker (and so by the fleet):
 * claims `webhooks` jobs and POSTs them. Close it with `closeWorker`, like the runs' worker.
 */
export function startWebhookWorker(
  options: WebhookWorkerOptions,
): Promise<Worker<WebhookJob, WebhookJobResult, string>> {
  const { config } = options;
  const processor = webhookDeliveryProcessor({
    hooks: new WebhookStore(options.redis, config.redis.keyPrefix),
    allowPrivate: config.webhooks.allowPrivate,
    ownPorts: config.egress.ownPorts,
    log: options.logger.child({ component: 'webhooks' }),
    ...options.delivery,
  });
  return createQueueWorker<WebhookJob, WebhookJobResult>(WEBHOOKS_QUEUE, processor, {
    redisUrl: options.redisUrl,
    prefix: config.redis.queuePrefix,
    concurrency: options.concurrency ?? 8,
    // A delivery ends within its answer deadline; a crashed worker's job comes back soon.
    lockDurationMs: 30_000,
    stalledIntervalMs: 30_000,
    maxStalledCount: 2,
    logger: options.logger.child({ component: 'webhooks' }),
  });
}
