import { type Processor, Worker } from 'bullmq';
import type { Logger } from 'pino';
import { connectRedis } from './connection.js';

export interface QueueWorkerOptions {
  redisUrl: string;
  prefix: string;
  concurrency: number;
  /** The job lock; BullMQ renews it at half this period while the processor runs. */
  lockDurationMs: number;
  stalledIntervalMs: number;
  /** The worker retry limit: a job stalled more often than this fails instead of coming back. */
  maxStalledCount: number;
  logger: Logger;
  /** Start claiming at once (default) or wait for `worker.run()`. */
  autorun?: boolean;
}

/**
 * A BullMQ worker on its own `worker`-role connection (commands wait out a Redis restart).
 * Call {@link closeWorker} to stop it.
 */
export async function createQueueWorker<Data, Result>(
  queueName: string,
  processor: Processor<Data, Result, string>,
  options: QueueWorkerOptions,
): Promise<Worker<Data, Result, string>> {
  const connection = await connectRedis(options.redisUrl, 'worker', `${queueName}-worker`);
  const worker = new Worker<Data, Result, string>(queueName, processor, {
    connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    maxStalledCount: options.maxStalledCount,
    autorun: options.autorun ?? true,
  });
  worker.on('error', (error) => options.logger.error({ queue: queueName, err: error }, 'worker error'));
  worker.on('failed', (job, error) =>
    options.logger.warn({ queue: queueName, job_id: job?.id, err: error }, 'job failed'),
  );
  // The worker does not own a connection it was handed; close it when the worker closes.
  worker.on('closed', () => connection.disconnect());
  await worker.waitUntilReady();
  return worker;
}

/**
 * Stops claiming and lets the jobs in flight finish for up to `timeoutMs`; past it, closes by
 * force. A job cut off then keeps its lock until the lock lapses, and BullMQ's stall check hands
 * it to another worker: nothing is lost, and the run resumes elsewhere.
 */
export async function closeWorker(worker: Worker, timeoutMs: number): Promise<'drained' | 'forced'> {
  let timer: NodeJS.Timeout | undefined;
  const outcome = await Promise.race([
    worker.close().then(() => 'drained' as const),
    new Promise<'forced'>((resolve) => {
      timer = setTimeout(() => resolve('forced'), timeoutMs);
    }),
  ]);
  clearTimeout(timer);
  if (outcome === 'forced') await worker.close(true);
  return outcome;
}
