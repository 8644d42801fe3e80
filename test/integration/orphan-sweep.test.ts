import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepQueuedWithoutJob } from '../../libs/runtime/index.js';
import { RunStore } from '../../libs/store/index.js';
import {
  closeRedis,
  connectRedis,
  createRunsQueue,
  enqueueRun,
  type RunsQueue,
  runJobId,
} from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

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

  const submit = async () =>
    (
      await store.submitRun({
        tenant: 'acme',
        principal: 'alice',
        sessionId,
        input: 'x',
        limits: TEST_RUN_LIMITS,
        timeoutMs: 3_600_000,
      })
    ).run;

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
});
