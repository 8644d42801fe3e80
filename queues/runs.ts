import { type JobsOptions, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { z } from 'zod';
import { recordIdSchema } from '../libs/contracts/index.js';

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

/**
 * The BullMQ job id of one execution. BullMQ refuses ids with `:` and treats all-digit ids as its
 * own counters, so ours are `run_…-x<execution>`: never all digits, never a colon.
 */
export function runJobId(runId: string, execution: number): string {
  const id = `${recordIdSchema.parse(runId)}-x${z.number().int().min(1).parse(execution)}`;
  if (id.includes(':') || /^\d+$/.test(id)) throw new Error(`unusable job id "${id}"`);
  return id;
}

/**
 * A run's failure is the run's own (its record says why), so BullMQ never retries a job: a
 * crashed worker's job comes back through stall detection, bounded by the worker retry limit.
 */
export const runJobOptions: Readonly<JobsOptions> = Object.freeze({
  attempts: 1,
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
});

export type RunsQueue = Queue<RunJob, void, string>;

export function createRunsQueue(connection: Redis, prefix: string): RunsQueue {
  return new Queue<RunJob, void, string>(RUNS_QUEUE, {
    connection,
    prefix,
    defaultJobOptions: { ...runJobOptions },
  });
}

/** Adds the job of the execution a run is queued at now (a submission, a resume, a retry). */
export function enqueueExecution(
  queue: RunsQueue,
  run: { id: string; execution: number },
): Promise<{ jobId: string }> {
  return enqueueRun(queue, { runId: run.id, execution: run.execution, enqueuedAtMs: Date.now() });
}

/**
 * Adds one run execution. The data is checked by its schema first; adding the same execution
 * again (a retried submission, a second resume) leaves the one job BullMQ already has.
 */
export async function enqueueRun(queue: RunsQueue, data: RunJob): Promise<{ jobId: string }> {
  const job = runJobSchema.parse(data);
  const jobId = runJobId(job.runId, job.execution);
  await queue.add(RUNS_QUEUE, job, { jobId });
  return { jobId };
}
