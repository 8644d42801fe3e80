import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { drainBoundMs } from '../../apps/run-worker/run-worker.js';
import { type EntryProcess, startEntryProcess } from '../fixtures/entry-process.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** A site whose `/slow` page answers after `SLOW_MS`: executions are still going at the drain bound. */
const SLOW_MS = 8_000;
function startSlowSite(): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    const answer = () => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Slow</title><h1>Slow page</h1>');
    };
    if (request.url === '/slow') setTimeout(answer, SLOW_MS);
    else answer();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    ),
  );
}

/** `npm run worker:run` as an operator runs it: the run worker's entry point in a process of its own. */
function startRunWorkerProcess(env: Record<string, string>): EntryProcess {
  return startEntryProcess('apps/run-worker/main.ts', env);
}

async function waitFor(
  check: () => Promise<boolean> | boolean,
  timeoutMs: number,
  what: string,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const RUNS = 4;

describe('a stop hands runs on', () => {
  let fleet: FleetHandle;
  let site: Awaited<ReturnType<typeof startSlowSite>>;
  let redis: Redis;
  const prefix = uniquePrefix('handoff');
  const token = randomBytes(32).toString('base64url');
  const sealKey = randomBytes(32).toString('base64');
  const workers: EntryProcess[] = [];
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const workerEnv = (shutdownMs: number): Record<string, string> => ({
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    RUN_WORKER_PORT: '0',
    LEASEHOLD_DATA_PLANE_TOKEN: token,
    LEASEHOLD_SEAL_KEY: sealKey,
    RUN_WORKER_CONCURRENCY: String(RUNS),
    SHUTDOWN_TIMEOUT_MS: String(shutdownMs),
    LOG_LEVEL: 'info',
  });

  beforeAll(async () => {
    site = await startSlowSite();
    fleet = await startTestFleet(prefix, { LEASEHOLD_DATA_PLANE_TOKEN: token, LEASEHOLD_SEAL_KEY: sealKey });
    // Runs are claimed by run worker processes only.
    await fleet.roles.runWorker.close();
    redis = new Redis(testRedisUrl());
  }, 60_000);

  afterAll(async () => {
    for (const worker of workers) {
      if (worker.child.exitCode === null) worker.child.kill('SIGKILL');
      await worker.exited;
    }
    await fleet?.close();
    await new Promise((resolve) => site?.server.close(resolve));
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  });

  async function handOff(label: string, shutdownMs: number): Promise<void> {
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Read the slow page.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const runIds: string[] = [];
    for (let index = 0; index < RUNS; index += 1) {
      expect(
        (await call('POST', '/v1/profiles', { id: `${label}${index}`, allowed_origins: [site.origin] }))
          .status,
      ).toBe(201);
      const session = await call('POST', '/v1/sessions', {
        agent_id: agent.body.id,
        browser_profile_id: `${label}${index}`,
      });
      const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
        input: `read ${index}`,
        // An hour's deadline: a run left to wait for it would fail the bound below by far.
        timeout_ms: 3_600_000,
        // A navigate still unanswered at the stop's bound is never sent twice (ADR-0127 d3): the
        // next owner learns from the lease that it applied, and the run goes on.
        script: {
          steps: [
            { tool: 'browser.navigate', url: `${site.origin}/slow` },
            { tool: 'browser.navigate', url: `${site.origin}/` },
            { tool: 'browser.observe' },
          ],
          answer: 'Read.',
        },
      });
      expect(submitted.status).toBe(201);
      runIds.push(submitted.body.id);
    }

    const first = startRunWorkerProcess(workerEnv(shutdownMs));
    workers.push(first);
    // Every run is running on the first worker, inside its first slow navigate.
    await waitFor(
      async () => {
        const runs = await Promise.all(runIds.map((id) => call('GET', `/v1/runs/${id}`)));
        return runs.every((run) => run.body.status === 'running');
      },
      45_000,
      'runs running on the first worker',
    );
    const stoppedAt = Date.now();
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/handed back at shutdown/);

    // Handed back by their owner in the same step: queued, no owner, the same execution.
    for (const id of runIds) {
      const run = await call('GET', `/v1/runs/${id}`);
      expect(run.body.status, id).toBe('queued');
      expect(run.body.execution, id).toBe(1);
    }

    const second = startRunWorkerProcess(workerEnv(shutdownMs));
    workers.push(second);
    for (const id of runIds) {
      const done = await waitForStatus(id, ['succeeded', 'failed'], 60_000);
      expect(done.status, id).toBe('succeeded');
    }
    // None waited for its deadline (an hour): the second worker took each over at once.
    expect(Date.now() - stoppedAt).toBeLessThan(60_000);
    for (const id of runIds) {
      const events = await fleet.store.readEvents(id);
      const handedBack = events.filter((event) => event.type === 'run.requeued');
      expect(handedBack, id).toHaveLength(1);
      expect(handedBack[0]?.data).toMatchObject({ reason: 'shutdown', previous: 'running' });
      expect(
        events.filter((event) => event.type === 'run.claimed'),
        id,
      ).toHaveLength(2);
      // A graceful stop leaves no call's outcome unknown.
      const steps = (await call('GET', `/v1/runs/${id}/steps`)).body.steps as Array<{
        tool: { outcome: { code: string | null } | null } | null;
      }>;
      expect(
        steps.flatMap((step) => (step.tool?.outcome?.code ? [step.tool.outcome.code] : [])),
        id,
      ).toEqual([]);
    }
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }

  it('SIGTERM a run worker mid-run: its runs go back queued without an owner, and a second worker finishes every one long before its deadline', async () => {
    // The drain bound (4.5 s of the 6 s shutdown bound) ends inside the slow page.
    await handOff('slow', 6_000);
  }, 150_000);

  it('a short shutdown bound still leaves the hand-back room inside it: the worker exits 0, its runs handed back', async () => {
    // 80% of 1.5 s plus the hand-back's second would pass the bound: the drain gives way to it.
    await handOff('short', 1_500);
  }, 150_000);
});

describe('the drain bound', () => {
  it('is 80% of the shutdown bound, but leaves the hand-back 1.5 s before the forced exit', () => {
    expect(drainBoundMs(10_000)).toBe(8_000);
    expect(drainBoundMs(6_000)).toBe(4_500);
    expect(drainBoundMs(1_500)).toBe(0);
    expect(drainBoundMs(1_000)).toBe(0);
  });
});
