import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FleetHandle, startFleet } from '../../apps/fleet/fleet.js';
import { type RunWorkerHandle, startRunWorker } from '../../apps/run-worker/run-worker.js';
import { loadConfig } from '../../libs/config/index.js';
import { createMetrics, createOpsServer } from '../../libs/telemetry/index.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { freePort, OwnRedis } from './own-redis.js';

/** Every pino line the fleet writes, parsed. */
function capturedLogger() {
  const lines: Record<string, unknown>[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { lines, logger: pino({ name: 'fleet', level: 'info' }, sink) };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A Redis of the test's own is stopped for longer
 * than the job lock while scripted browser runs are mid-way, then started again (AOF on). The
 * fleet is real (Chromium, BullMQ, the sweeper) with two run workers; its pino output and the
 * process's stderr are captured.
 */
describe('a Redis outage pauses runs', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-redis-outage-'));
  let ownRedis: OwnRedis;
  let fleet: FleetHandle;
  let secondWorker: RunWorkerHandle | undefined;
  let site: Server;
  let origin: string;
  const captured = capturedLogger();
  const stderr: string[] = [];
  const writeStderr = process.stderr.write.bind(process.stderr);
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    ownRedis = new OwnRedis(await freePort(), dir);
    await ownRedis.start();
    // Each page answers after 700 ms, so a run of six navigations is mid-way when Redis stops.
    site = createServer((request, response) => {
      setTimeout(() => {
        response.setHeader('content-type', 'text/html');
        response.end(`<!doctype html><title>Page</title><h1>${request.url}</h1>`);
      }, 700);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startFleet({
      config: loadConfig({
        REDIS_URL: ownRedis.url,
        LEASEHOLD_KEY_PREFIX: `${uniquePrefix('redis-outage')}:`,
        QUEUE_PREFIX: uniquePrefix('redis-outage'),
        PORT: '0',
        BROWSER_WORKER_PORT: '0',
        LOG_LEVEL: 'info',
        // The outage below (6 s) outlasts the job lock by far: the case that matters.
        RUN_LOCK_DURATION_MS: '2000',
        RUN_STALLED_INTERVAL_MS: '1000',
        SWEEP_INTERVAL_MS: '1000',
        ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      }),
      logger: captured.logger,
    });
    // A second run worker: every worker's stall check races the re-locks when Redis is back.
    secondWorker = await startRunWorker({
      config: fleet.config,
      logger: captured.logger,
      metrics: createMetrics({ role: 'run-worker' }),
      redisUrl: ownRedis.url,
    });
    process.stderr.write = ((chunk: string | Uint8Array, ...rest: never[]) => {
      stderr.push(chunk.toString());
      return writeStderr(chunk, ...rest);
    }) as typeof process.stderr.write;
  });

  afterAll(async () => {
    process.stderr.write = writeStderr;
    await secondWorker?.close();
    await fleet?.close();
    await ownRedis?.stop();
    await new Promise((resolve) => site?.close(resolve));
    rmSync(dir, { recursive: true, force: true });
  });

  async function submit(name: string): Promise<string> {
    expect((await call('POST', '/v1/profiles', { id: name, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: `Read ${name}.`,
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id, browser_profile_id: name });
    const steps = Array.from({ length: 6 }, (_, index) => ({
      tool: 'browser.navigate',
      url: `${origin}/${name}/${index}`,
    }));
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: `Read ${name}`,
      script: { steps, answer: 'read' },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  it('every run succeeds, /readyz is 503 during the outage and 200 after, the API answers 503 unavailable, and the log has one line per state change', async () => {
    const runIds = await Promise.all(
      ['outage-a', 'outage-b', 'outage-c', 'outage-d', 'outage-e', 'outage-f'].map(submit),
    );
    for (const runId of runIds) await waitForStatus(runId, ['running']);
    // Half a second in, each run is mid-script (a page answers after 700 ms) when Redis stops.
    await sleep(500);
    const base = fleet.urls.api.replace(/\/v1$/, '');
    // A role's own ops server as the run worker and the sweeper build it (createOpsServer): with
    // no check of its own, it must still say when its Redis is away (a run worker's said 200).
    const workerOps = createOpsServer(captured.logger, fleet.metrics.registry, () => []);
    const workerReadyz = `${await workerOps.listen({ host: '127.0.0.1', port: 0 })}/readyz`;

    await ownRedis.stop();
    const stoppedAt = Date.now();
    // Both roles say so once their connections have noticed; wait for that, not for a guessed time.
    await expect
      .poll(async () => [(await fetch(`${base}/readyz`)).status, (await fetch(workerReadyz)).status])
      .toEqual([503, 503]);
    const readyDuring = await fetch(`${base}/readyz`);
    const workerReadyDuring = await fetch(workerReadyz);
    const viewDuring = await call('GET', `/v1/runs/${runIds[0]}`);
    // The outage itself lasts 6 s from the stop, however soon the roles noticed it.
    await sleep(Math.max(0, stoppedAt + 6_000 - Date.now()));
    await ownRedis.start();

    const ends = await Promise.all(
      runIds.map((runId) => waitForStatus(runId, ['succeeded', 'failed'], 60_000)),
    );
    const readyAfter = await fetch(`${base}/readyz`);
    const workerReadyAfter = await fetch(workerReadyz);
    await workerOps.close();

    expect(readyDuring.status).toBe(503);
    expect(viewDuring).toMatchObject({ status: 503, body: { error: { code: 'unavailable' } } });
    expect(readyAfter.status).toBe(200);
    expect(workerReadyDuring.status).toBe(503);
    expect(workerReadyAfter.status).toBe(200);
    expect(ends.map((run) => ({ status: run.status, error: run.error ?? null }))).toEqual(
      runIds.map(() => ({ status: 'succeeded', error: null })),
    );
    const changes = captured.lines
      .filter((line) => line.redis === 'down' || line.redis === 'up')
      .map((line) => line.redis);
    expect(changes).toEqual(['down', 'up']);
    expect(stderr.join('')).not.toContain('ECONNREFUSED');
    expect(JSON.stringify(captured.lines)).not.toContain('ECONNREFUSED\\n');
  });
});
