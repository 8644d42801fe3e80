import { type JobsOptions, Queue } from 'bullmq';
import { z } from 'zod';
import { recordIdSchema, tenantIdSchema, webhookEventSchema } from '../libs/contracts/index.js';
import type { RedisClient } from '../libs/store/redis-client.js';
import { isRedisUnreachable } from '../libs/telemetry/redis-link.js';

/** The queue of webhook deliveries: one job per webhook and event. */
export const WEBHOOKS_QUEUE = 'webhooks';

/**
 * One delivery: the event to one webhook. The URL and secret are read from the tenant's webhook
 * when it is delivered (a deleted webhook is told nothing more), so no secret sits in a job.
 */
export const webhookJobSchema = z.object({
  tenant: tenantIdSchema,
  webhookId: recordIdSchema,
  event: webhookEventSchema,
});
export type WebhookJob = z.output<typeof webhookJobSchema>;

/** What a delivery job returns: the receiver's status, or why nothing was sent. */
export interface WebhookJobResult {
  status_code: number | null;
  skipped?: 'webhook_deleted';
}

export type WebhooksQueue = Queue<WebhookJob, WebhookJobResult, string>;

/**
 * The job id of one event to one webhook: `<webhook id>-<event id>`, never a colon, never all
 * digits. The lifecycle tells an event at least once; with this id BullMQ keeps one job, so the
 * webhook is told once — for as long as the finished job is kept ({@link webhookJobOptions}).
 */
export function webhookJobId(webhookId: string, eventId: string): string {
  const id = `${recordIdSchema.parse(webhookId)}-${webhookEventSchema.shape.id.parse(eventId)}`;
  if (id.includes(':') || /^\d+$/.test(id)) throw new Error(`unusable job id "${id}"`);
  return id;
}

/** Attempts and backoff of a delivery: 8 attempts, the first retry after 1 s, doubling (about 2 min in all). */
export interface WebhookRetryPolicy {
  attempts: number;
  firstDelayMs: number;
}
export const DEFAULT_WEBHOOK_RETRY: Readonly<WebhookRetryPolicy> = Object.freeze({
  attempts: 8,
  firstDelayMs: 1_000,
});

/**
 * A delivery's job options. Finished jobs are kept a week — a second telling within it finds the
 * job and adds nothing — and at most 10 000 (the log of each attempt is the webhook's own).
 */
export function webhookJobOptions(retry: WebhookRetryPolicy = DEFAULT_WEBHOOK_RETRY): JobsOptions {
  return {
    attempts: retry.attempts,
    backoff: { type: 'exponential', delay: retry.firstDelayMs },
    removeOnComplete: { age: 7 * 24 * 3600, count: 10_000 },
    removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
  };
}

export function createWebhooksQueue(connection: RedisClient, prefix: string): WebhooksQueue {
  const queue = new Queue<WebhookJob, WebhookJobResult, string>(WEBHOOKS_QUEUE, { connection, prefix });
  // As the runs queue: an outage is logged once by the link watch, anything else in one line.
  queue.on('error', (error) => {
    if (!isRedisUnreachable(error)) process.emitWarning(`webhooks queue: ${error.message}`);
  });
  return queue;
}
