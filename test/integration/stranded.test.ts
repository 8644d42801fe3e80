import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { type RunWorkerHandle, startRunWorker } from '../../apps/run-worker/run-worker.js';
import {
  handBackDelayMs,
  isRetryableFault,
  MAX_FAULT_HANDBACKS,
  settleEscapedError,
} from '../../libs/run-worker/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { createMetrics, type Metrics } from '../../libs/telemetry/index.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type PressSite, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { finishedJob } from '../fixtures/run-jobs.js';
import { TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/** A page to navigate to and observe. */
const SITE_PAGE = '<!doctype html><title>Stranded</title><h1>Here</h1><a href="/">Again</a>';

/** An error as a lost connection raises it (ioredis, fetch): retryable. */
function connectionLost(): Error {
  return Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
}

describe('no stranded run: an error that escapes an execution', () => {
  let fleet: FleetHandle;
  let runWorker: RunWorkerHandle;
  let redis: Redis;
  let queue: RunsQueue;
  let site: PressSite;
  let sessionId: string;
  let prefix: string;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const logLines: string[] = [];
  const hits = new Set<string>();
  let armed: { point: string; error: () => Error; before?: () => Promise<void>; skip?: number } | undefined;
  const metrics: Metrics = createMetrics();

  beforeAll(async () => {
    prefix = uniquePrefix('stranded');
    site = await startPressSite(SITE_PAGE);
    fleet = await startTestFleet(prefix);
    // The fleet's own run worker steps aside for one with the fault hook.
    await fleet.roles.runWorker.close();
    const sink = new Writable({
      write(chunk, _encoding, done) {
        logLines.push(String(chunk));
        done();
      },
    });
    runWorker = await startRunWorker({
      config: fleet.config,
      logger: pino({ level: 'info' }, sink),
      metrics,
      redisUrl: testRedisUrl(),
      faults: (point) => {
        hits.add(point);
        if (armed?.point !== point) return;
        if (armed.skip) {
          armed.skip -= 1;
          return;
        }
        const { error, before } = armed;
        armed = undefined;
        if (!before) throw error();
        // Not a fault of its own: something happens to the run at this point, then the call goes on.
        return before();
      },
    });
    redis = new Redis(testRedisUrl());
    queue = createRunsQueue(redis, prefix);
    sessionId = await boundSession({
      profileId: 'site',
      origin: site.origin,
      instructions: 'Look at the page.',
    });
  }, 60_000);

  afterAll(async () => {
    await runWorker?.close();
    await queue?.close();
    await fleet?.close();
    await site?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  async function submit(label: string): Promise<string> {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: `look (${label})`,
      script: {
        steps: [{ tool: 'browser.navigate', url: `${site.origin}/` }, { tool: 'browser.observe' }],
        answer: 'Seen.',
      },
    });
    expect(submitted.status).toBe(201);
    return submitted.body.id;
  }

  /** The run's live lease on the profile, if the live lease is the run's. */
  async function liveLeaseOf(runId: string): Promise<string | undefined> {
    const leases = new RedisLeaseStore(redis, `${prefix}:`);
    const profile = { tenant: 'dev', id: 'site' };
    const leaseId = await leases.liveLeaseId(profile);
    if (!leaseId) return undefined;
    const lease = await leases.getLease(profile, leaseId);
    return lease?.scope.run_id === runId ? leaseId : undefined;
  }

  async function noLeaseWithin(runId: string, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while ((await liveLeaseOf(runId)) !== undefined) {
      if (Date.now() > deadline) return false;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return true;
  }

  it('runs clean with the hook idle: the points it passes are what the faults below throw at', async () => {
    const runId = await submit('idle');
    const done = await waitForStatus(runId, ['succeeded', 'failed']);
    expect(done.status).toBe('succeeded');
    const job = await finishedJob(queue, runId, 1, 5_000);
    expect(job?.returnvalue).toEqual({ status: 'succeeded', code: null });
    expect(job?.name).toBe(`run:dev/${sessionId}`);
    for (const point of ['agent.load', 'transcript.load', 'usage.add', 'invocation.start', 'lease.close'])
      expect(hits).toContain(point);
  }, 30_000);

  it('a fault at each await point ends the run internal_error (or leaves its end standing) within two sweep intervals, its lease closed, its end counted once and its error id in one log line', async () => {
    const sweepIntervalMs = fleet.config.sweeper.intervalMs;
    const points = [...hits];
    expect(points.length).toBeGreaterThanOrEqual(10);
    // The idle run above succeeded; every end below is counted once more, however it came about.
    const ends = { succeeded: 1, internal_error: 0 };
    for (const point of points) {
      armed = { point, error: () => new Error(`fault injected at ${point}`) };
      const started = Date.now();
      const runId = await submit(point);
      const done = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 2 * sweepIntervalMs);
      expect(Date.now() - started, point).toBeLessThan(2 * sweepIntervalMs);
      expect(armed, `${point} was reached`).toBeUndefined();
      if (done.status === 'failed') {
        ends.internal_error += 1;
        expect(done.error.code, point).toBe('internal_error');
        const errorId = /err_[0-9a-f]{16}/.exec(done.error.message)?.[0];
        expect(errorId, point).toBeDefined();
        const lines = logLines.filter((line) => line.includes(errorId as string));
        expect(lines, point).toHaveLength(1);
        // Its stack is in the log line, never in the run's message.
        expect(done.error.message).not.toMatch(/\n\s+at /);
        expect(lines[0]).toContain(`fault injected at ${point}`);
        const job = await finishedJob(queue, runId, done.execution, 5_000);
        expect(await job?.getState()).toBe('failed');
        expect(job?.failedReason).toMatch(/internal_error/);
        expect(job?.attemptsMade).toBe(1);
      } else {
        // Only a fault after the end was written leaves the run's end standing.
        expect(['end.read', 'lease.close'], point).toContain(point);
        expect(done.status).toBe('succeeded');
        ends.succeeded += 1;
      }
      // No ended run's lease is left for the upkeep to renew.
      expect(await noLeaseWithin(runId, 5_000), point).toBe(true);
    }
    const counted = await metrics.registry.metrics();
    expect(counted).toContain(`leasehold_runs_ended_total{status="succeeded",code="none"} ${ends.succeeded}`);
    expect(counted).toContain(
      `leasehold_runs_ended_total{status="failed",code="internal_error"} ${ends.internal_error}`,
    );
  }, 240_000);

  it('a lost connection hands the run back queued at the same execution, and the next execution finishes it', async () => {
    armed = { point: 'invocation.complete', error: connectionLost };
    const runId = await submit('connection lost');
    const done = await waitForStatus(runId, ['succeeded', 'failed'], 15_000);
    expect(done.status).toBe('succeeded');
    expect(done.execution).toBe(1);
    const requeued = (await fleet.store.readEvents(runId)).filter((event) => event.type === 'run.requeued');
    expect(requeued).toHaveLength(1);
    expect(requeued[0]?.data).toMatchObject({ reason: 'fault', previous: 'running', handbacks: 1 });
    expect(
      (await fleet.store.readEvents(runId)).filter((event) => event.type === 'run.claimed'),
    ).toHaveLength(2);
  }, 30_000);

  it('a transcript write refused because another worker took the run over leaves the run to that worker: not failed, the job says lost', async () => {
    let runId: string | undefined;
    armed = {
      // The first model turn's append, once the usage written beside it has landed: the append
      // alone meets the takeover.
      point: 'transcript.append',
      error: () => new Error('unused'),
      // A takeover as BullMQ's stall check would make it: the same execution, another owner.
      before: async () => {
        while (!runId) await new Promise((resolve) => setTimeout(resolve, 10));
        await new Promise((resolve) => setTimeout(resolve, 200));
        expect((await fleet.store.claimRun(runId, 1, 'the-other-worker', { takeOver: true })).ok).toBe(true);
      },
    };
    runId = await submit('taken over');
    const job = await finishedJob(queue, runId, 1, 5_000);
    expect(job.returnvalue).toEqual({ status: 'lost', code: 'not_owner' });
    const run = await fleet.store.getRun(runId);
    expect(run?.status).toBe('running');
    expect((await fleet.store.readEvents(runId)).map((event) => event.type)).not.toContain('run.failed');
    await fleet.store.failRun(runId, 'internal_error', { message: 'test over' });
  }, 30_000);

  it('an error that escapes after another worker took the run over leaves the run to that worker: only its owner fails it', async () => {
    let runId: string | undefined;
    armed = {
      point: 'agent.load',
      error: () => new Error('unused'),
      before: async () => {
        while (!runId) await new Promise((resolve) => setTimeout(resolve, 10));
        expect((await fleet.store.claimRun(runId, 1, 'the-other-worker', { takeOver: true })).ok).toBe(true);
        throw new Error('a fault after the takeover');
      },
    };
    runId = await submit('fault after takeover');
    const job = await finishedJob(queue, runId, 1, 5_000);
    expect(job.returnvalue).toEqual({ status: 'lost', code: null });
    expect((await fleet.store.getRun(runId))?.status).toBe('running');
    expect((await fleet.store.readEvents(runId)).map((event) => event.type)).not.toContain('run.failed');
    await fleet.store.failRun(runId, 'internal_error', { message: 'test over' });
  }, 30_000);

  /** A run stored queued but never enqueued: no worker sees it, so a test settles its executions. */
  async function unservedRun(text: string) {
    const { run } = await fleet.store.submitRun({
      tenant: 'dev',
      principal: 'dev',
      sessionId,
      input: { text },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    return run;
  }

  it('hands a run back at most MAX_FAULT_HANDBACKS times, then refuses and leaves it running for the worker to fail', async () => {
    // A run no worker sees (never enqueued): the store's bound, without the backoff's minute.
    const run = await unservedRun('bounded');
    for (let handback = 1; handback <= MAX_FAULT_HANDBACKS; handback += 1) {
      expect((await fleet.store.claimRun(run.id, 1, `owner-${handback}`)).ok).toBe(true);
      const released = await fleet.store.releaseRun(run.id, `owner-${handback}`, {
        maxHandbacks: MAX_FAULT_HANDBACKS,
      });
      expect(released).toMatchObject({
        ok: true,
        detail: String(handback),
        run: { status: 'queued', execution: 1 },
      });
    }
    expect((await fleet.store.claimRun(run.id, 1, 'owner-last')).ok).toBe(true);
    const refused = await fleet.store.releaseRun(run.id, 'owner-last', { maxHandbacks: MAX_FAULT_HANDBACKS });
    expect(refused.ok).toBe(false);
    expect((await fleet.store.getRun(run.id))?.status).toBe('running');
    // Only the owner may hand its run back.
    expect((await fleet.store.releaseRun(run.id, 'someone-else')).ok).toBe(false);
    expect([1, 2, 3, 4, 5].map((handbacks) => handBackDelayMs(handbacks))).toEqual([
      1_000, 2_000, 4_000, 8_000, 16_000,
    ]);
    await fleet.store.failRun(run.id, 'internal_error', { message: 'test over' });
  });

  it('waits RUN_HANDBACK_BASE_MS before the first re-execution after a fault, twice that before the next', async () => {
    const run = await unservedRun('backoff');
    const lifecycle = new RunLifecycle({ store: fleet.store, enqueue: async () => undefined });
    const deps = { store: fleet.store, lifecycle, logger: pino({ level: 'silent' }), handBackBaseMs: 250 };
    const waits: number[] = [];
    for (let execution = 1; execution <= 3; execution += 1) {
      const claim = await fleet.store.claimRun(run.id, 1, `backoff-${execution}`);
      if (!claim.ok) throw new Error(`claim ${execution} refused`);
      const settled = await settleEscapedError(deps, claim.run, `backoff-${execution}`, connectionLost());
      if (settled.kind !== 'handed_back') throw new Error(`execution ${execution} was not handed back`);
      waits.push(settled.delayMs);
    }
    expect(waits).toEqual([250, 500, 1_000]);
    await fleet.store.failRun(run.id, 'internal_error', { message: 'test over' });
  });
});

describe('which escaped errors are retryable', () => {
  it('a lost connection or a retryable Leasehold error is; a refused write or a bug is not', () => {
    expect(isRetryableFault(connectionLost())).toBe(true);
    expect(isRetryableFault(new Error('Connection is closed.'))).toBe(true);
    expect(isRetryableFault(new Error('wrapped', { cause: connectionLost() }))).toBe(true);
    expect(isRetryableFault(Object.assign(new Error('restarting'), { retryable: true }))).toBe(true);
    expect(isRetryableFault(new TypeError("Cannot read properties of undefined (reading 'x')"))).toBe(false);
    expect(isRetryableFault(Object.assign(new Error('too long'), { code: 'too_long' }))).toBe(false);
  });
});
