import { UnrecoverableError, type Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweeperHandle } from '../../apps/sweeper/sweeper.js';
import { RunStore } from '../../libs/store/index.js';
import { createMetrics, type Metrics } from '../../libs/telemetry/index.js';
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
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';
import { startTestSweeper } from '../fixtures/sweeper.js';

const TENANT = 'acme';
/** More failed jobs than the sweeper reads in one pass (200). */
const NEWER_FAILURES = 260;
const STALLED_REASON = 'job stalled more than allowable limit';

/** Polls with this file's patience. */
const poll = <T>(read: () => Promise<T>, done: (value: T) => boolean) => eventually(read, done, 15_000);

describe('the sweeper: reclaim', () => {
  const prefix = uniquePrefix('sweeper-reclaim');
  let redis: Redis;
  let store: RunStore;
  let queue: RunsQueue;
  let worker: Worker<RunJob, void, string> | undefined;
  let sweeper: SweeperHandle | undefined;
  let metrics: Metrics;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-sweeper-reclaim');
    store = new RunStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
    metrics = createMetrics({ role: 'sweeper' });
  });
  afterAll(async () => {
    await sweeper?.close();
    await worker?.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  it('reclaims a stalled run hidden under more than a page of newer failed jobs', async () => {
    const sessionId = await createTestSession(store, TENANT, { instructions: 'answer' });
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: null,
      limits: TEST_RUN_LIMITS,
      timeoutMs: 600_000,
    });
    ran(await store.claimRun(run.id, 1, 'dead-worker'));

    // BullMQ fails a job with this reason once it stalled past the worker retry limit (the real
    // stall: test/browser/reclaim.test.ts); the newer jobs fail the way a failed run's job does.
    worker = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async (job) => {
        if (job.data.runId === run.id) throw new Error(STALLED_REASON);
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
    await enqueueRun(queue, { runId: run.id, execution: 1, enqueuedAtMs: Date.now() });
    await poll(
      () => queue.getFailedCount(),
      (count) => count === 1,
    );
    // A few milliseconds on, so every later failure is newer than the stalled run's by the failed
    // list's millisecond order, not tied with it.
    await new Promise((resolve) => setTimeout(resolve, 5));
    for (let i = 0; i < NEWER_FAILURES; i++) {
      const runId = `run_newer-${String(i).padStart(4, '0')}`;
      await enqueueRun(queue, { runId, execution: 1, enqueuedAtMs: Date.now() });
    }
    expect(
      await poll(
        () => queue.getFailedCount(),
        (count) => count === NEWER_FAILURES + 1,
      ),
    ).toBe(NEWER_FAILURES + 1);
    await worker.close();
    worker = undefined;

    sweeper = await startTestSweeper(prefix, { metrics });

    const reclaimed = await poll(
      () => store.getRun(run.id),
      (current) => current?.status === 'failed',
    );
    expect(reclaimed).toMatchObject({ status: 'failed', error: { code: 'reclaimed' } });
    const ended = await metrics.registry.getSingleMetric('leasehold_runs_ended_total')?.get();
    expect(ended?.values).toEqual([
      expect.objectContaining({
        labels: expect.objectContaining({ status: 'failed', code: 'reclaimed' }),
        value: 1,
      }),
    ]);
    const counted = await metrics.registry.getSingleMetric('leasehold_runs_reclaimed_total')?.get();
    expect(counted?.values[0]?.value).toBe(1);
  }, 60_000);
});
