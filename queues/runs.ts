import { Job, type JobsOptions, Queue } from 'bullmq';
import type { ChainableCommander } from 'ioredis';
import { z } from 'zod';
import { recordIdSchema } from '../libs/contracts/index.js';
import type { RedisClient } from '../libs/store/redis-client.js';
import { isRedisUnreachable } from '../libs/telemetry/redis-link.js';

/** The queue every run execution goes through (DESIGN §4). */
export const RUNS_QUEUE = 'runs';

/** One execution of a run: its first start, or a resume after an approval or a child's end. */
export const runJobSchema = z.object({
  runId: recordIdSchema,
  /** 1 for the first execution; each resume adds one. Part of the job id, so a duplicate adds nothing. */
  execution: z.number().int().min(1),
  /** When the API (or a resume) enqueued it, for submit-to-claim latency. */
  enqueuedAtMs: z.number().int().nonnegative(),
});
export type RunJob = z.output<typeof runJobSchema>;

/** Built once: a zod schema costs more to build than to check. */
const executionSchema = z.number().int().min(1);

/**
 * The BullMQ job id of one execution. BullMQ refuses ids with `:` and treats all-digit ids as its
 * own counters, so ours are `run_…-x<execution>`: never all digits, never a colon.
 */
export function runJobId(runId: string, execution: number): string {
  const id = `${recordIdSchema.parse(runId)}-x${executionSchema.parse(execution)}`;
  if (id.includes(':') || /^\d+$/.test(id)) throw new Error(`unusable job id "${id}"`);
  return id;
}

/**
 * A run's failure is the run's own (its record says why), so BullMQ never retries a job: a
 * crashed worker's job comes back through stall detection, bounded by the worker retry limit.
 * A failed run's job is failed by its worker after the run's end is recorded, and
 * with one attempt BullMQ leaves it in its failed set.
 */
export const runJobOptions: Readonly<JobsOptions> = Object.freeze({
  attempts: 1,
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
});

/**
 * What a run's job returns (the queue tells the truth): the run's status when its
 * execution ended — an end, or `parked` / `waiting_*` / `queued` for an execution that stopped
 * short of one — and its error code (`null` unless it failed), so Bull Board shows each outcome.
 * A job whose run was not this execution's to run says `not_claimed` with the refusal's code.
 */
export interface RunJobResult {
  status: string;
  code: string | null;
}

export type RunsQueue = Queue<RunJob, RunJobResult, string>;

/**
 * BullMQ priorities (lower is sooner; every job carries one, since BullMQ takes jobs without one
 * before all prioritised jobs). A later execution — a resume after an approval, whose run holds
 * its page and whose person is waiting, or after a child's end — goes before fresh runs
 * ; within a priority, first in first out.
 */
export const RESUMED_PRIORITY = 1;
export const FRESH_PRIORITY = 2;

/** The job name: what the run is (its tenant and session), as Bull Board lists it. */
export function runJobName(run: { tenant?: string; session_id?: string }): string {
  return run.tenant && run.session_id ? `run:${run.tenant}/${run.session_id}` : RUNS_QUEUE;
}

export function createRunsQueue(connection: RedisClient, prefix: string): RunsQueue {
  const queue = new Queue<RunJob, RunJobResult, string>(RUNS_QUEUE, {
    connection,
    prefix,
    defaultJobOptions: { ...runJobOptions },
  });
  // A queue without an 'error' listener prints a raw multi-line stack per reconnect
  // attempt (BullMQ's console.error). An unreachable Redis is logged once by the link watch;
  // anything else is one line, with no stack.
  queue.on('error', (error) => {
    if (!isRedisUnreachable(error)) process.emitWarning(`runs queue: ${error.message}`);
  });
  return queue;
}

/** Adds the job of the execution a run is queued at now (a submission, a resume, a retry). */
export function enqueueExecution(
  queue: RunsQueue,
  run: { id: string; execution: number; tenant?: string; session_id?: string },
): Promise<{ jobId: string }> {
  return enqueueRun(
    queue,
    { runId: run.id, execution: run.execution, enqueuedAtMs: Date.now() },
    runJobName(run),
  );
}

/**
 * Adds one run execution. The data is checked by its schema first; adding the same execution
 * again (a retried submission, a second resume) leaves the one job BullMQ already has.
 */
export async function enqueueRun(
  queue: RunsQueue,
  data: RunJob,
  name: string = RUNS_QUEUE,
): Promise<{ jobId: string }> {
  const job = runJobSchema.parse(data);
  const jobId = runJobId(job.runId, job.execution);
  const priority = job.execution > 1 ? RESUMED_PRIORITY : FRESH_PRIORITY;
  await queue.add(name, job, { jobId, priority });
  return { jobId };
}

/**
 * Queues the add of a new run's first job on `batch` (a pipeline of the queue's own
 * connection), so the run's record and its job travel in one round trip, record first. The same
 * job `enqueueExecution` adds (id, name, data, priority, the queue's defaults), through the
 * insert BullMQ's own bulk add and flows use; the batch's owner executes it and checks the reply.
 * Throws at once where BullMQ's scripts are not loaded on the batch's connection (`await
 * queue.client` first).
 */
export function addRunJobTo(
  queue: RunsQueue,
  batch: ChainableCommander,
  run: { id: string; tenant: string; session_id: string },
): void {
  const data: RunJob = { runId: run.id, execution: 1, enqueuedAtMs: Date.now() };
  const jobId = runJobId(run.id, 1);
  const job = new Job<RunJob, RunJobResult, string>(
    queue,
    runJobName(run),
    data,
    { ...queue.jobsOpts, jobId, priority: FRESH_PRIORITY },
    jobId,
  );
  // BullMQ's transaction insert calls `runCommand` on what it is given (its own pipelines have it).
  const transaction = batch as ChainableCommander & {
    runCommand?: (name: string, args: unknown[]) => unknown;
  };
  const commands = transaction as unknown as Record<string, ((args: unknown[]) => unknown) | undefined>;
  let queued = false;
  transaction.runCommand = (name: string, args: unknown[]) => {
    const command = commands[name];
    if (typeof command === 'function') {
      command.call(transaction, args);
      queued = true;
    }
    return transaction;
  };
  // The insert is queued synchronously (its reply is the batch's; this promise only settles). A
  // failure inside it would surface only in that promise, so whether it queued is checked here.
  job.addJob(transaction as never).catch(() => {});
  if (!queued)
    throw new Error('addRunJobTo: the job was not queued (the runs queue is not ready on this connection)');
}

/**
 * Whether the job of a run's execution will still claim it: it exists and has not finished. A
 * finished job (completed or failed) of a run still queued at that execution never will — its
 * hand-back to waiting failed (seen under load, a worker stopping while Redis was away)
 * — so it is removed, and the orphan sweep adds the execution's job afresh under the same id.
 */
export async function runJobPending(queue: RunsQueue, runId: string, execution: number): Promise<boolean> {
  const job = await queue.getJob(runJobId(runId, execution));
  if (!job) return false;
  const state = await job.getState();
  if (state !== 'completed' && state !== 'failed') return true;
  await job.remove();
  return false;
}
