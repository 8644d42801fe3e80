import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunStore } from '../../libs/store/index.js';
import { sweepQueuedWithoutJob } from '../../libs/sweeper/index.js';
import {
  closeRedis,
  connectRedis,
  createRunsQueue,
  enqueueRun,
  type RunsQueue,
  runJobId,
  runJobPending,
} from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, submitStoreRun } from '../fixtures/run-store.js';

/** A run stored `queued` whose job was never added (its enqueuer died in between) is not lost. */
describe('the sweep of queued runs without a job', () => {
  const prefix = uniquePrefix('orphan-sweep');
  let redis: Redis;
  let store: RunStore;
  let queue: RunsQueue;
  let sessionId: string;
  let nowMs = Date.now();

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-orphan-sweep');
    store = new RunStore(redis, `${prefix}:`, () => nowMs);
    queue = createRunsQueue(redis, prefix);
    sessionId = await createTestSession(store, 'acme', { instructions: 'x' });
  });
  afterAll(async () => {
    await queue.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  const submit = () => submitStoreRun(store, sessionId);

  const sweep = () =>
    sweepQueuedWithoutJob({
      store,
      jobExists: async (runId, execution) => (await queue.getJob(runJobId(runId, execution))) !== undefined,
      enqueue: async (run) => {
        await enqueueRun(queue, { runId: run.id, execution: run.execution, enqueuedAtMs: nowMs });
      },
      cursor: '0',
      graceMs: 30_000,
      clock: () => nowMs,
    });

  it('adds the job of a run queued past the grace period, once, and leaves one that has its job', async () => {
    const orphan = await submit();
    const enqueued = await submit();
    await enqueueRun(queue, { runId: enqueued.id, execution: 1, enqueuedAtMs: nowMs });
    const young = await sweep();
    expect(young.requeued).not.toContain(orphan.id);

    nowMs += 31_000;
    const late = await sweep();
    expect(late.requeued).toContain(orphan.id);
    expect(late.requeued).not.toContain(enqueued.id);
    expect(await queue.getJob(runJobId(orphan.id, 1))).toBeDefined();
    expect((await sweep()).requeued).not.toContain(orphan.id);
  });

  it('adds the job again for a queued run whose job finished without claiming it (a failed hand-back)', async () => {
    const run = await submit();
    await enqueueRun(queue, { runId: run.id, execution: 1, enqueuedAtMs: nowMs });
    // The job is taken and fails while the run stays queued at the same execution (jobs of the
    // test above are taken and failed on the way: they are done with).
    const connection = redis.duplicate();
    const taker = new Worker(queue.name, null, { connection, prefix });
    for (;;) {
      const next = await taker.getNextJob('test-taker');
      if (!next) throw new Error('the run job was not found');
      await next.moveToFailed(new Error('hand-back failed'), 'test-taker', false);
      if (next.id === runJobId(run.id, 1)) break;
    }
    await taker.close();
    connection.disconnect();
    expect(await (await queue.getJob(runJobId(run.id, 1)))?.getState()).toBe('failed');
    nowMs += 31_000;
    const pending = (runId: string, execution: number) => runJobPending(queue, runId, execution);
    const swept = await sweepQueuedWithoutJob({
      store,
      jobExists: pending,
      enqueue: async (queued) => {
        await enqueueRun(queue, { runId: queued.id, execution: queued.execution, enqueuedAtMs: nowMs });
      },
      cursor: '0',
      graceMs: 30_000,
      clock: () => nowMs,
    });
    expect(swept.requeued).toContain(run.id);
    expect(await (await queue.getJob(runJobId(run.id, 1)))?.getState()).toMatch(/waiting|prioritized/);
  });
});
