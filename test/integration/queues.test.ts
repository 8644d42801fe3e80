import { Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../libs/contracts/index.js';
import {
  closeRedis,
  closeWorker,
  connectRedis,
  createQueueWorker,
  createRunsQueue,
  enqueueRun,
  handBack,
  RUNS_QUEUE,
  type RunJob,
  type RunsQueue,
  SHUTDOWN_REASON,
} from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const redisUrl = testRedisUrl();

describe('the runs queue on a real Redis', () => {
  const prefix = uniquePrefix('queues');
  let producer: Redis;
  let queue: RunsQueue;

  beforeAll(async () => {
    producer = await connectRedis(redisUrl, 'producer', 'test-producer');
    queue = createRunsQueue(producer, prefix);
  });

  afterAll(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(producer);
  });

  it('adds one job for a run execution however often it is enqueued', async () => {
    const runId = newId('run');
    const job = { runId, execution: 1, enqueuedAtMs: Date.now() };
    const first = await enqueueRun(queue, job);
    const second = await enqueueRun(queue, { ...job, enqueuedAtMs: job.enqueuedAtMs + 5 });
    expect(second.jobId).toBe(first.jobId);
    const stored = await queue.getJob(first.jobId);
    expect(stored?.data.enqueuedAtMs).toBe(job.enqueuedAtMs);
    expect(await queue.getJobCountByTypes('waiting', 'prioritized')).toBe(1);

    await enqueueRun(queue, { ...job, execution: 2 });
    expect(await queue.getJobCountByTypes('waiting', 'prioritized')).toBe(2);
  });

  it('refuses job data that does not fit the schema before it reaches Redis', async () => {
    const before = await queue.count();
    await expect(
      enqueueRun(queue, { runId: 'not an id', execution: 1, enqueuedAtMs: Date.now() } as RunJob),
    ).rejects.toMatchObject({
      name: 'ZodError',
      issues: [expect.objectContaining({ code: 'invalid_format', path: ['runId'] })],
    });
    expect(await queue.count()).toBe(before);
  });

  it('never retries a failed run job (the run records its own failure)', async () => {
    const runId = newId('run');
    const { jobId } = await enqueueRun(queue, { runId, execution: 1, enqueuedAtMs: Date.now() });
    expect((await queue.getJob(jobId))?.opts.attempts).toBe(1);
  });
});

describe('graceful stop of a queue worker', () => {
  it('lets the job in flight finish before closing', async () => {
    const prefix = uniquePrefix('drain');
    const producer = await connectRedis(redisUrl, 'producer', 'test-drain');
    const queue = createRunsQueue(producer, prefix);
    let release: () => void = () => {};
    const started = new Promise<void>((resolve) => {
      release = resolve;
    });
    let finished = false;
    const worker = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async () => {
        release();
        await new Promise((resolve) => setTimeout(resolve, 500));
        finished = true;
      },
      { ...workerTimings, redisUrl, prefix, logger: silentLogger() },
    );
    const { jobId } = await enqueueRun(queue, {
      runId: newId('run'),
      execution: 1,
      enqueuedAtMs: Date.now(),
    });
    await started;
    expect(await closeWorker(worker, 5_000)).toBe('drained');
    expect(finished).toBe(true);
    expect(await (await queue.getJob(jobId))?.getState()).toBe('completed');
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(producer);
  });

  it('hands a job it cannot finish within the bound back to another worker, which completes it', async () => {
    const prefix = uniquePrefix('handback');
    const producer = await connectRedis(redisUrl, 'producer', 'test-handback');
    const queue = createRunsQueue(producer, prefix);
    let claimedByFirst!: () => void;
    const firstClaimed = new Promise<void>((resolve) => {
      claimedByFirst = resolve;
    });
    const slow = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async (job, token, signal) => {
        claimedByFirst();
        // A long execution that checks its signal between steps, as the run loop does.
        for (let step = 0; step < 600; step += 1) {
          if (signal?.aborted && signal.reason === SHUTDOWN_REASON) await handBack(job, token);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      },
      { ...workerTimings, redisUrl, prefix, logger: silentLogger() },
    );
    const { jobId } = await enqueueRun(queue, {
      runId: newId('run'),
      execution: 1,
      enqueuedAtMs: Date.now(),
    });
    await firstClaimed;
    expect(await closeWorker(slow, 300)).toBe('handed_back');
    // Back in line: every run job carries a priority, so BullMQ lists it as prioritised.
    expect(await (await queue.getJob(jobId))?.getState()).toBe('prioritized');

    const processedBy: string[] = [];
    const rescuer = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async (job) => {
        processedBy.push(String(job.id));
      },
      { ...workerTimings, redisUrl, prefix, logger: silentLogger() },
    );
    await waitFor(async () => (await (await queue.getJob(jobId))?.getState()) === 'completed', 10_000);
    expect(processedBy).toEqual([jobId]);
    await closeWorker(rescuer, 2_000);
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(producer);
  });
});

describe('connection roles', () => {
  it('a producer connection names the Redis it could not reach and gives up within its connect timeout', async () => {
    const started = Date.now();
    await expect(connectRedis('redis://user:pw@127.0.0.1:1', 'producer', 'test-dead')).rejects.toThrow(
      /Redis at redis:\/\/\*\*\*@127\.0\.0\.1:1 did not answer/,
    );
    expect(Date.now() - started).toBeLessThan(15_000);
  });

  it('a worker connection is usable by a BullMQ worker (no per-request retry limit)', async () => {
    const prefix = uniquePrefix('role');
    const connection = await connectRedis(redisUrl, 'worker', 'test-role');
    expect(connection.options.maxRetriesPerRequest).toBeNull();
    const worker = new Worker('noop', async () => {}, { connection, prefix, autorun: false });
    await worker.waitUntilReady();
    await worker.close();
    const queue = new Queue('noop', { connection, prefix });
    await queue.obliterate({ force: true });
    await queue.close();
    await closeRedis(connection);
  });
});

const workerTimings = {
  concurrency: 1,
  lockDurationMs: 1_000,
  stalledIntervalMs: 300,
  maxStalledCount: 2,
};

async function waitFor(condition: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
