import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { type RunWorkerHandle, startRunWorker } from '../../apps/run-worker/run-worker.js';
import { createMetrics, type Metrics } from '../../libs/telemetry/index.js';
import { queueDepthStates } from '../../libs/telemetry/metrics.js';
import {
  createRunsQueue,
  enqueueRun,
  FRESH_PRIORITY,
  RESUMED_PRIORITY,
  type RunsQueue,
  runJobId,
} from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { silentLogger } from '../fixtures/logger.js';
import { type PressSite, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { finishedJob } from '../fixtures/run-jobs.js';

/** A page with a button to click (an effect that asks for approval). */
const SITE_PAGE = '<!doctype html><title>Queue</title><h1>Queue</h1><button>Go</button>';

describe('the queue tells the truth; resumed runs first', () => {
  let fleet: FleetHandle;
  let site: PressSite;
  let redis: Redis;
  let queue: RunsQueue;
  let metrics: Metrics;
  let runWorker: RunWorkerHandle | undefined;
  let browserSession: string;
  let plainSession: string;
  const prefix = uniquePrefix('qtruth');
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  async function startWorker(): Promise<void> {
    // Each worker registers its metrics once: a registry of its own per start.
    metrics = createMetrics();
    runWorker = await startRunWorker({
      config: { ...fleet.config, runWorker: { ...fleet.config.runWorker, concurrency: 1 } },
      logger: silentLogger(),
      metrics,
      redisUrl: testRedisUrl(),
    });
  }

  async function stopWorker(): Promise<void> {
    await runWorker?.close();
    runWorker = undefined;
  }

  async function submit(sessionId: string, script: unknown): Promise<string> {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, { input: 'go', script });
    expect(submitted.status).toBe(201);
    return submitted.body.id;
  }

  beforeAll(async () => {
    site = await startPressSite(SITE_PAGE);
    fleet = await startTestFleet(prefix);
    await fleet.roles.runWorker.close();
    redis = new Redis(testRedisUrl());
    queue = createRunsQueue(redis, prefix);
    browserSession = await boundSession({
      profileId: 'site',
      origin: site.origin,
      instructions: 'Press Go.',
    });
    const plainAgent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'Answer.' });
    plainSession = (await call('POST', '/v1/sessions', { agent_id: plainAgent.body.id })).body.id;
  }, 60_000);

  afterAll(async () => {
    await stopWorker();
    await queue?.close();
    await fleet?.close();
    await site?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  it('a failed run’s job lands in BullMQ’s failed set with the run’s code, tried once; ends are counted by status and code', async () => {
    await startWorker();
    // Navigating off the profile's origins is refused `url_disallowed`; a script stops there.
    const failed = await submit(browserSession, {
      steps: [{ tool: 'browser.navigate', url: 'http://127.0.0.1:9/elsewhere' }],
      answer: 'never',
    });
    const done = await waitForStatus(failed, ['succeeded', 'failed']);
    expect(done.status).toBe('failed');
    const code = done.error.code as string;
    const job = await finishedJob(queue, failed, 1);
    expect(await job.getState()).toBe('failed');
    expect(job.failedReason).toContain(code);
    expect(job.attemptsMade).toBe(1);
    expect(job.name).toBe(`run:dev/${browserSession}`);
    expect(await queue.getJobCounts('failed')).toMatchObject({ failed: 1 });

    const succeeded = await submit(plainSession, { steps: [], answer: 'Done.' });
    expect((await waitForStatus(succeeded, ['succeeded', 'failed'])).status).toBe('succeeded');
    expect((await finishedJob(queue, succeeded, 1)).returnvalue).toEqual({ status: 'succeeded', code: null });

    const text = await metrics.registry.metrics();
    expect(text).toContain(`leasehold_runs_ended_total{status="failed",code="${code}"} 1`);
    expect(text).toContain('leasehold_runs_ended_total{status="succeeded",code="none"} 1');
  }, 60_000);

  it('a parked execution completes with a return value naming its status; once approved, it is claimed before a backlog of fresh runs', async () => {
    const parkedId = await submit(browserSession, {
      steps: [
        { tool: 'browser.navigate', url: `${site.origin}/` },
        { tool: 'browser.act', target: { role: 'button', name: 'Go' }, action: 'click' },
      ],
      answer: 'Pressed.',
    });
    const parked = await waitForStatus(parkedId, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    expect((await finishedJob(queue, parkedId, 1)).returnvalue).toEqual({ status: 'parked', code: null });

    // A backlog while no worker claims: fresh runs first in line, then the approval.
    await stopWorker();
    const fresh: string[] = [];
    for (let index = 0; index < 5; index += 1)
      fresh.push(await submit(plainSession, { steps: [], answer: 'ok' }));
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(approved.status).toBe(200);
    // Prioritised jobs are out of BullMQ's wait list; the depth metric counts them as waiting.
    const depth = createMetrics();
    depth.watchQueue('runs', () => queue.getJobCounts());
    expect(await depth.registry.metrics()).toMatch(/leasehold_queue_jobs\{queue="runs",state="waiting"\} 6/);

    await startWorker();
    expect((await waitForStatus(parkedId, ['succeeded', 'failed'])).status).toBe('succeeded');
    for (const id of fresh) await waitForStatus(id, ['succeeded', 'failed']);
    const claimedAt = async (id: string, execution: number) =>
      (await queue.getJob(runJobId(id, execution)))?.processedOn ?? Number.POSITIVE_INFINITY;
    const resumedAt = await claimedAt(parkedId, 2);
    for (const id of fresh) expect(resumedAt, id).toBeLessThan(await claimedAt(id, 1));
    // Each end counted once, where this worker caused it: the resumed run and the five fresh ones.
    expect(await metrics.registry.metrics()).toContain(
      'leasehold_runs_ended_total{status="succeeded",code="none"} 6',
    );
  }, 90_000);

  it('the sweeper counts the ends it makes: a queued run past its deadline', async () => {
    await stopWorker();
    const submitted = await call('POST', `/v1/sessions/${plainSession}/runs`, {
      input: 'late',
      timeout_ms: 1_000,
      script: { steps: [], answer: 'never' },
    });
    const done = await waitForStatus(
      submitted.body.id,
      ['failed', 'succeeded'],
      3 * fleet.config.sweeper.intervalMs,
    );
    expect(done).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
    expect(await fleet.metrics.registry.metrics()).toMatch(
      /leasehold_runs_ended_total\{status="failed",code="deadline_exceeded",role="fleet"\} 1/,
    );
  }, 30_000);
});

describe('queue depth and priorities', () => {
  it('counts prioritised jobs as waiting', () => {
    expect(queueDepthStates({ waiting: 2, prioritized: 5, active: 1 })).toEqual({ waiting: 7, active: 1 });
    expect(queueDepthStates({ active: 1 })).toEqual({ waiting: 0, active: 1 });
  });

  it('gives a later execution (a resume) a sooner priority than a first one, first in first out within each', async () => {
    const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    const prefix = uniquePrefix('qprio');
    const queue = new Queue('runs', { connection: redis, prefix }) as unknown as RunsQueue;
    try {
      const ids = ['run_aaaaaaaaaaaaaaaaaaaa', 'run_bbbbbbbbbbbbbbbbbbbb', 'run_cccccccccccccccccccc'];
      await enqueueRun(queue, { runId: ids[0] as string, execution: 1, enqueuedAtMs: 1 });
      await enqueueRun(queue, { runId: ids[1] as string, execution: 1, enqueuedAtMs: 2 });
      await enqueueRun(queue, { runId: ids[2] as string, execution: 3, enqueuedAtMs: 3 });
      const jobs = await queue.getJobs(['prioritized']);
      expect(jobs.map((job) => [job.data.runId, job.opts.priority])).toEqual(
        expect.arrayContaining([
          [ids[0], FRESH_PRIORITY],
          [ids[1], FRESH_PRIORITY],
          [ids[2], RESUMED_PRIORITY],
        ]),
      );
      expect(RESUMED_PRIORITY).toBeLessThan(FRESH_PRIORITY);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      redis.disconnect();
    }
  });
});
