import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { reclaimStalledRuns } from '../../libs/sweeper/index.js';
import {
  createQueueWorker,
  enqueueExecution,
  enqueueRun,
  RUNS_QUEUE,
  type RunJob,
} from '../../queues/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const limits = {
  max_steps: 32,
  max_model_calls: 24,
  max_tool_calls: 64,
  reserve_model_calls: 2,
  reserve_tool_calls: 4,
  max_cost_micro_usd: null,
  cost_reserve_micro_usd: 0,
};

describe('the reclaim sweep', () => {
  const prefix = uniquePrefix('reclaim');
  const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const store = new RunStore(redis, `${prefix}:`);
  const queue = new Queue<RunJob>(RUNS_QUEUE, { connection: redis, prefix });
  let browserWorker: TestBrowserWorker;

  beforeAll(async () => {
    browserWorker = await startTestBrowserWorker({ prefix, workerId: 'bw-reclaim' });
  });

  afterAll(async () => {
    await browserWorker?.handle.close();
    await queue.obliterate({ force: true });
    await queue.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('fails a run whose worker stalled past the retry limit `reclaimed`, and the lifecycle releases its lease', async () => {
    await browserWorker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'reclaimed', tenant: 't1', principal: 'p1', allowed_origins: ['https://example.com'] },
    });
    const agent = await store.putAgent('t1', { model: 'scripted', instructions: '' });
    if (agent.status === 'not_found') throw new Error('agent not stored');
    const session = await store.createSession({
      tenant: 't1',
      principal: 'p1',
      agentId: agent.agent.id,
      browserProfileId: 'reclaimed',
    });
    if (!session) throw new Error('session not stored');
    const { run } = await store.submitRun({
      tenant: 't1',
      principal: 'p1',
      sessionId: session.id,
      input: 'x',
      limits,
      timeoutMs: 600_000,
    });

    // A worker claims the run, takes its lease, and dies without a word (its lock lapses).
    let claimed!: () => void;
    const claimedOnce = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    const timings = { concurrency: 1, lockDurationMs: 400, stalledIntervalMs: 200, maxStalledCount: 0 };
    const dying = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async (job, token) => {
        await store.claimRun(run.id, job.data.execution, `${job.id}:${token}`);
        const lease = await browserWorker.call('POST', '/v1/tenants/t1/profiles/reclaimed/leases', {
          idempotencyKey: idemKey(),
          body: {
            tenant: 't1',
            principal: 'p1',
            run_id: run.id,
            attempt: 1,
            requested_expires_at_ms: Date.now() + 600_000,
          },
        });
        expect(lease.status).toBe(201);
        claimed();
        await new Promise(() => {});
      },
      { ...timings, redisUrl: testRedisUrl(), prefix, logger: silentLogger() },
    );
    await enqueueRun(queue, { runId: run.id, execution: run.execution, enqueuedAtMs: Date.now() });
    await claimedOnce;
    await dying.close(true);

    // Another worker's stall check finds the lapsed lock; with a retry limit of 0 the job fails.
    const survivor = await createQueueWorker<RunJob, void>(RUNS_QUEUE, async () => {}, {
      ...timings,
      redisUrl: testRedisUrl(),
      prefix,
      logger: silentLogger(),
    });
    const deadline = Date.now() + 10_000;
    while ((await queue.getFailedCount()) === 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 100));
    await survivor.close();

    const deps = {
      failedJobs: async () =>
        (await queue.getFailed()).map((job) => ({ data: job.data, failedReason: job.failedReason })),
      failRun: (
        runId: string,
        reason: 'reclaimed',
        options: { expectedExecution: number; message: string },
      ) => store.failRun(runId, reason, options),
      // The sweeper's wiring (apps/sweeper): every run it ends is followed up by the run lifecycle.
      onRunEnded: (ended: RunView) => lifecycle.followUp(ended, { ended: true }),
    };
    const lifecycle = new RunLifecycle({
      store,
      enqueue: (queued) => enqueueExecution(queue, queued),
      release: {
        leases: new RedisLeaseStore(redis, `${prefix}:`),
        workers: new BrowserWorkerRegistry(redis, `${prefix}:`),
        dataPlaneToken: TEST_TOKEN,
      },
    });
    expect(await reclaimStalledRuns(deps)).toEqual([run.id]);
    expect(await store.getRun(run.id)).toMatchObject({ status: 'failed', error: { code: 'reclaimed' } });
    expect(
      await new RedisLeaseStore(redis, `${prefix}:`).liveLeaseId({ tenant: 't1', id: 'reclaimed' }),
    ).toBeUndefined();
    // A second pass changes nothing.
    expect(await reclaimStalledRuns(deps)).toEqual([]);
  });
});
