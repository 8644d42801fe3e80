import { UnrecoverableError } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FailedJobWalk } from '../../libs/sweeper/index.js';
import {
  closeRedis,
  connectRedis,
  createQueueWorker,
  createRunsQueue,
  enqueueRun,
  RUNS_QUEUE,
  type RunJob,
  type RunsQueue,
} from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const JOBS = 450;
const PAGE = 200;

/** Polls with this file's patience. */
const poll = <T>(read: () => Promise<T>, done: (value: T) => boolean) => eventually(read, done, 20_000);

describe('the failed-job walk', () => {
  const prefix = uniquePrefix('failed-job-walk');
  const cursorKey = `${prefix}:sweeper:reclaim-cursor`;
  let redis: Redis;
  let queue: RunsQueue;

  /** Fails `count` run jobs the way a failed run's job fails; resolves when all are in the failed set. */
  async function failJobs(from: number, count: number): Promise<void> {
    const worker = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async () => {
        throw new UnrecoverableError('run failed: model_error');
      },
      {
        redisUrl: testRedisUrl(),
        prefix,
        concurrency: 50,
        lockDurationMs: 30_000,
        stalledIntervalMs: 30_000,
        maxStalledCount: 1,
        logger: silentLogger(),
      },
    );
    const before = await queue.getFailedCount();
    for (let i = from; i < from + count; i++)
      await enqueueRun(queue, {
        runId: `run_walk-${String(i).padStart(4, '0')}`,
        execution: 1,
        enqueuedAtMs: 0,
      });
    await poll(
      () => queue.getFailedCount(),
      (failed) => failed === before + count,
    );
    await worker.close();
  }

  /** Reads and commits pages until the walk has caught up; answers every page's run ids. */
  async function walkAll(walk: FailedJobWalk): Promise<string[][]> {
    const pages: string[][] = [];
    for (;;) {
      const page = await walk.read();
      if (page.jobs.length === 0) return pages;
      pages.push(page.jobs.map((job) => job.data?.runId ?? '?'));
      await walk.commit(page);
    }
  }

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-failed-job-walk');
    queue = createRunsQueue(redis, prefix);
    await failJobs(0, JOBS);
    // BullMQ fails a batch of jobs in one millisecond; here every job shares one failure time.
    const failedKey = queue.toKey('failed');
    const members = await redis.zrange(failedKey, 0, -1);
    const scoreMs = Date.now() - 60_000;
    await redis.zadd(failedKey, 'XX', ...members.flatMap((member) => [scoreMs, member]));
  }, 60_000);
  afterAll(async () => {
    await queue.obliterate({ force: true });
    await queue.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  it('reads every failed job once, a page at a time, though more than a page failed in one millisecond', async () => {
    const walk = new FailedJobWalk({ queue, redis, cursorKey, pageSize: PAGE });
    const again = await walk.read();
    expect(again.jobs).toHaveLength(PAGE);
    expect(again.jobs[0]).toMatchObject({ data: { execution: 1 }, failedReason: 'run failed: model_error' });
    // A page not committed (its pass died) is read again.
    expect((await walk.read()).jobs.map((job) => job.id)).toEqual(again.jobs.map((job) => job.id));

    const pages = await walkAll(walk);
    expect(pages.map((page) => page.length)).toEqual([PAGE, PAGE, JOBS - 2 * PAGE]);
    const seen = pages.flat();
    expect(new Set(seen).size).toBe(JOBS);
    expect(seen.every((runId) => runId.startsWith('run_walk-'))).toBe(true);
  });

  it('goes on from the cursor kept in Redis, and reads a new failure only once it has settled', async () => {
    await failJobs(JOBS, 1);
    // The next leader's walk: what the last one committed stays walked.
    const unsettled = new FailedJobWalk({ queue, redis, cursorKey, settleMs: 60_000 });
    expect((await unsettled.read()).jobs).toEqual([]);
    const settled = new FailedJobWalk({ queue, redis, cursorKey, settleMs: 0 });
    const pages = await walkAll(settled);
    expect(pages).toEqual([[`run_walk-${String(JOBS).padStart(4, '0')}`]]);
  });
});
