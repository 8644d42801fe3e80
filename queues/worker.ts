import { DelayedError, type Job, type Processor, WaitingError, Worker } from 'bullmq';
import type { Logger } from 'pino';
import type { RedisClient } from '../libs/store/redis-client.js';
import { isRedisUnreachable } from '../libs/telemetry/redis-link.js';
import { connectRedis, MAX_RECONNECT_DELAY_MS, type RedisTarget } from './connection.js';
import type { JobLocks } from './job-locks.js';

export interface QueueWorkerOptions {
  /** Redis: a URL, or a cluster's nodes. */
  redisUrl: RedisTarget;
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
  /** Where the jobs' locks are followed: claimed, renewed, renewals failed or refused. */
  locks?: JobLocks;
}

/**
 * BullMQ's errors for a lock that lapsed (a renewal refused, a finish without the lock): the lock
 * book has it, and the run's own line says what became of the run.
 */
const LOCK_LOST = /^(could not renew lock|Lock mismatch|Missing lock) for job /;

/**
 * The run a job is about, for its lines (every line about a run carries `run_id`): a
 * runs job's `runId`, a webhook delivery's event's `run_id`; undefined for any other job.
 */
function runIdOfJob(data: unknown): string | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const { runId, event } = data as { runId?: unknown; event?: { run_id?: unknown } };
  if (typeof runId === 'string') return runId;
  return typeof event?.run_id === 'string' ? event.run_id : undefined;
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
  const held = new Map<string, string>();
  const { locks } = options;
  const tracked: Processor<Data, Result, string> = async (job, token, signal) => {
    if (job.id && token) held.set(job.id, token);
    if (job.id) locks?.claimed(job.id, job.processedOn);
    try {
      return await processor(job, token, signal);
    } finally {
      if (job.id) held.delete(job.id);
      if (job.id) locks?.released(job.id);
    }
  };
  const worker = new LockReportingWorker<Data, Result>(locks, queueName, tracked, {
    connection,
    prefix: options.prefix,
    concurrency: options.concurrency,
    lockDuration: options.lockDurationMs,
    stalledInterval: options.stalledIntervalMs,
    maxStalledCount: options.maxStalledCount,
    autorun: options.autorun ?? true,
  });
  // An unreachable Redis is logged once per outage by the link watch, not per attempt.
  worker.on('error', (error) => {
    if (!isRedisUnreachable(error) && !LOCK_LOST.test(error.message))
      options.logger.error({ queue: queueName, err: error }, 'worker error');
  });
  worker.on('failed', (job, error) =>
    options.logger.warn(
      { queue: queueName, job_id: job?.id, run_id: runIdOfJob(job?.data), err: error },
      'job failed',
    ),
  );
  keepLocksThroughOutages(connection, worker, held, options);
  // The worker does not own a connection it was handed; close it when the worker closes.
  worker.on('closed', () => connection.disconnect());
  await worker.waitUntilReady();
  return worker;
}

/**
 * A BullMQ worker that tells its lock book how each renewal went: sent when, refused for which
 * jobs (their locks are another's or gone), or not answered at all.
 */
class LockReportingWorker<Data, Result> extends Worker<Data, Result, string> {
  constructor(
    private readonly locks: JobLocks | undefined,
    ...args: ConstructorParameters<typeof Worker<Data, Result, string>>
  ) {
    super(...args);
  }

  override async extendJobLocks(jobIds: string[], tokens: string[], duration: number): Promise<string[]> {
    const sentAtMs = Date.now();
    try {
      const refused = await super.extendJobLocks(jobIds, tokens, duration);
      this.locks?.lost(refused);
      this.locks?.renewed(
        jobIds.filter((id) => !refused.includes(id)),
        sentAtMs,
      );
      return refused;
    } catch (error) {
      this.locks?.renewalFailed(jobIds);
      throw error;
    }
  }
}

/**
 * Outages pause: a Redis stopped for longer than the job lock comes back with the locks
 * of the jobs still running expired, and the first stall check would hand each of them to a
 * second execution (a takeover that finds the first one's dispatched call `outcome_unknown`).
 * When its connection drops, each worker queues — first on that connection, so it runs first
 * when Redis answers, before any stall check this worker queued — one transaction that
 * 1. holds off every worker's stall check ({@link stallHoldMs}; BullMQ's own `stalled-check`
 *    throttle key, which its check script tests before anything else): whichever worker's
 *    connection comes back first, its hold lands before its own check, and lasts until the
 *    slowest of the others has reconnected and re-locked (each one's hold restarts it);
 * 2. re-locks every job this worker still holds: `SET NX` with its own token (never another
 *    worker's lock), and takes it out of the stalled set.
 * A worker that died during the outage is found a hold later than otherwise.
 */
/**
 * How long a reconnecting worker holds off the stall checks: a stall interval past the moment the
 * slowest other worker can be back. Connections come back up to one reconnection delay apart, and
 * a loaded process may miss its attempt's moment by as much again (CI: a hold of one 1 s interval
 * let the first worker's check take over every job of a second that came back ~2 s later).
 */
export function stallHoldMs(stalledIntervalMs: number): number {
  return stalledIntervalMs + 2 * MAX_RECONNECT_DELAY_MS;
}

function keepLocksThroughOutages(
  connection: RedisClient,
  worker: Worker,
  held: ReadonlyMap<string, string>,
  options: Pick<QueueWorkerOptions, 'lockDurationMs' | 'stalledIntervalMs'>,
): void {
  let queued = false;
  connection.on('close', () => {
    if (queued || worker.closing) return;
    queued = true;
    const relock = connection.multi();
    relock.set(worker.toKey('stalled-check'), Date.now(), 'PX', stallHoldMs(options.stalledIntervalMs));
    for (const [jobId, token] of held) {
      relock.set(worker.toKey(`${jobId}:lock`), token, 'PX', options.lockDurationMs, 'NX');
      relock.srem(worker.toKey('stalled'), jobId);
    }
    const done = () => {
      queued = false;
    };
    relock.exec().then(done, done);
  });
}

/** The abort reason a processor sees when its worker is shutting down (not a user's cancel). */
export const SHUTDOWN_REASON = 'worker_shutdown';

/** How long cancelled processors get to hand their jobs back once the drain bound has passed. */
const HAND_BACK_GRACE_MS = 1_000;

/**
 * Puts a job the processor cannot finish back on the waiting list at once (no stall, no retry
 * counted), for another worker to claim. Call it from a processor whose signal was aborted with
 * {@link SHUTDOWN_REASON}, and let the error it throws propagate.
 */
export async function handBack(job: Job, token: string | undefined): Promise<never> {
  await job.moveToWait(token);
  throw new WaitingError();
}

/**
 * Puts a job back to be claimed again after `delayMs` (a run handed back after a
 * retryable fault, with backoff), without counting an attempt. Let the error it throws propagate.
 */
export async function handBackLater(job: Job, token: string | undefined, delayMs: number): Promise<never> {
  await job.moveToDelayed(Date.now() + delayMs, token);
  throw new DelayedError();
}

function within<T>(promise: Promise<T>, timeoutMs: number): Promise<T | 'timeout'> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * Stops claiming and lets the jobs in flight finish for up to `timeoutMs` (`drained`). Past it,
 * their processors' signals are aborted with {@link SHUTDOWN_REASON} so they hand their jobs back
 * ({@link handBack}) — `handed_back`. A processor that ignores its signal is left behind
 * (`abandoned`): its lock lapses when the process exits, and BullMQ's stall check gives the job
 * to another worker. Nothing is lost either way.
 */
export async function closeWorker(
  worker: Worker,
  timeoutMs: number,
): Promise<'drained' | 'handed_back' | 'abandoned'> {
  const closed = worker.close();
  if ((await within(closed, timeoutMs)) !== 'timeout') return 'drained';
  worker.cancelAllJobs(SHUTDOWN_REASON);
  return (await within(closed, HAND_BACK_GRACE_MS)) === 'timeout' ? 'abandoned' : 'handed_back';
}
