import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { BrowserWorkerAway } from '../../libs/provider/index.js';
import { MAX_FAULT_HANDBACKS, settleEscapedError } from '../../libs/run-worker/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { RunStore } from '../../libs/store/index.js';
import { createMetrics, createOpsServer, type Registry } from '../../libs/telemetry/index.js';
import {
  createQueueWorker,
  createRunsQueue,
  enqueueRun,
  RUNS_QUEUE,
  type RunJob,
} from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { capturingLogger, type LogLine } from '../fixtures/logger.js';
import { type PressSite, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';
import { startTestSweeper } from '../fixtures/sweeper.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const DEBUG = 20;
const INFO = 30;

/** The `request answered` lines of `id` in `lines`, read until there is one (or 5 s passed). */
function answeredLines(lines: LogLine[], id: string): Promise<LogLine[]> {
  return eventually(
    async () => lines.filter((line) => line.req_id === id && line.msg === 'request answered'),
    (found) => found.length > 0,
    5_000,
  );
}

/** The value of one series of `name` whose labels include `labels`; undefined when there is none. */
async function seriesValue(
  registry: Registry,
  name: string,
  labels: Record<string, string>,
): Promise<number | undefined> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return undefined;
  const { values } = await metric.get();
  const series = values.find((value) =>
    Object.entries(labels).every(([label, wanted]) => String(value.labels[label]) === wanted),
  );
  return series?.value;
}

describe('one log line per request, its id echoed, its count by route template', () => {
  const prefix = uniquePrefix('reqlog');
  const captured = capturingLogger('debug');
  let fleet: FleetHandle;
  let site: PressSite;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const apiBase = () => fleet.urls.api.replace(/\/v1$/, '');

  /**
   * The `request answered` lines of one request id, once there is one: the line is written when
   * the answer has gone out, which the client may see first.
   */
  const requestLines = (id: string): Promise<LogLine[]> => answeredLines(captured.lines, id);

  beforeAll(async () => {
    site = await startPressSite('<!doctype html><title>Log</title><h1>Log</h1>');
    fleet = await startTestFleet(prefix, {}, { logger: captured.logger });
  }, 60_000);

  afterAll(async () => {
    await fleet?.close();
    await site?.close();
    const redis = new Redis(testRedisUrl());
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  it('logs an API request once with its given id, route template, status, duration and tenant, and echoes the id', async () => {
    const response = await fetch(`${apiBase()}/v1/runs/run_missing0000`, {
      headers: { authorization: `Bearer ${fleet.apiKey}`, 'x-request-id': 'client-id-42' },
    });
    expect(response.status).toBe(404);
    expect(response.headers.get('x-request-id')).toBe('client-id-42');
    await response.text();

    const lines = await requestLines('client-id-42');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: INFO,
      component: 'api',
      method: 'GET',
      route: '/v1/runs/:id',
      status: 404,
      tenant: 'dev',
    });
    expect(typeof lines[0]?.duration_ms).toBe('number');
    // Fastify's own per-request lines stay off.
    expect(captured.lines.filter((line) => /incoming request|request completed/.test(line.msg))).toEqual([]);
  });

  it('makes an id when none is given, and replaces one that is too long or not visible ASCII', async () => {
    const offered = [undefined, 'x'.repeat(129), 'two words', 'é-accent'];
    for (const given of offered) {
      const response = await fetch(`${apiBase()}/healthz`, {
        headers: given === undefined ? {} : { 'x-request-id': given },
      });
      await response.text();
      const echoed = response.headers.get('x-request-id') ?? '';
      expect(echoed, String(given)).toMatch(UUID);
      // Probes log at debug, not info: a load balancer's every few seconds would drown the log.
      expect(await requestLines(echoed)).toMatchObject([{ level: DEBUG, route: '/healthz', status: 200 }]);
    }
    const longest = 'y'.repeat(128);
    const kept = await fetch(`${apiBase()}/healthz`, { headers: { 'x-request-id': longest } });
    await kept.text();
    expect(kept.headers.get('x-request-id')).toBe(longest);
  });

  it('logs and echoes refused, unknown and unroutable requests as `unmatched`, without a tenant', async () => {
    const cases: Array<{ path: string; key?: string; status: number; route: string }> = [
      { path: '/no/such/path', status: 401, route: 'unmatched' },
      { path: '/no/such/path', key: fleet.apiKey, status: 404, route: 'unmatched' },
      { path: '/v1/runs/%ff', key: fleet.apiKey, status: 400, route: 'unmatched' },
      { path: '/v1/runs/run_any00000000', status: 401, route: '/v1/runs/:id' },
    ];
    for (const [index, { path, key, status, route }] of cases.entries()) {
      const id = `edge-${index}`;
      const response = await fetch(`${apiBase()}${path}`, {
        headers: { 'x-request-id': id, ...(key ? { authorization: `Bearer ${key}` } : {}) },
      });
      await response.text();
      expect(response.status, path).toBe(status);
      expect(response.headers.get('x-request-id'), path).toBe(id);
      const lines = await requestLines(id);
      expect(lines, path).toHaveLength(1);
      expect(lines[0], path).toMatchObject({ method: 'GET', route, status });
      if (!key) expect(lines[0]?.tenant, path).toBeUndefined();
    }
  });

  it('logs a data-plane request once with its route template and the tenant its path names once admitted', async () => {
    const headers = {
      authorization: `Bearer ${fleet.config.secrets.dataPlaneToken}`,
      'content-type': 'application/json',
    };
    const admitted = await fetch(`${fleet.urls.browserWorker}/v1/tenants/t-log/profiles`, {
      headers: { ...headers, 'x-request-id': 'dp-admitted' },
    });
    expect(admitted.status).toBe(200);
    expect(admitted.headers.get('x-request-id')).toBe('dp-admitted');
    await admitted.text();
    expect(await requestLines('dp-admitted')).toMatchObject([
      { component: 'data-plane', route: '/v1/tenants/:tenant/profiles', status: 200, tenant: 't-log' },
    ]);

    const refused = await fetch(`${fleet.urls.browserWorker}/v1/tenants/t-log/profiles`, {
      headers: { 'x-request-id': 'dp-refused' },
    });
    expect(refused.status).toBe(401);
    await refused.text();
    const [line] = await requestLines('dp-refused');
    expect(line).toMatchObject({ route: '/v1/tenants/:tenant/profiles', status: 401 });
    expect(line?.tenant).toBeUndefined();
  });

  it('counts requests by server, route template and status, never by raw URL', async () => {
    const registry = fleet.metrics.registry;
    const before =
      (await seriesValue(registry, 'leasehold_http_requests_total', {
        server: 'api',
        method: 'GET',
        route: '/v1/runs/:id',
        status: '404',
      })) ?? 0;
    for (const id of ['run_countme0001', 'run_countme0002']) {
      const answer = await call('GET', `/v1/runs/${id}`, undefined, { headers: { 'x-request-id': id } });
      expect(answer.status).toBe(404);
      // Counted in the same hook as the line, once the answer has gone out.
      await requestLines(id);
    }
    expect(
      await seriesValue(registry, 'leasehold_http_requests_total', {
        server: 'api',
        method: 'GET',
        route: '/v1/runs/:id',
        status: '404',
      }),
    ).toBe(before + 2);
    expect(
      await seriesValue(registry, 'leasehold_http_requests_total', {
        server: 'data_plane',
        route: '/v1/tenants/:tenant/profiles',
        status: '200',
      }),
    ).toBeGreaterThanOrEqual(1);
    const text = await registry.metrics();
    expect(text).toContain('leasehold_http_request_duration_seconds_bucket{');
    expect(text).toContain('route="unmatched"');
    expect(text).not.toContain('run_countme');
  });

  it('ends a failed run’s execution with one line naming its run, status and error code', async () => {
    const session = await boundSession({ profileId: 'logged', origin: site.origin, instructions: 'Go.' });
    // Navigating off the profile's origins is refused `url_disallowed`; a script stops there.
    const submitted = await call('POST', `/v1/sessions/${session}/runs`, {
      input: 'go',
      script: { steps: [{ tool: 'browser.navigate', url: 'http://127.0.0.1:9/elsewhere' }], answer: 'never' },
    });
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id as string;
    const done = await waitForStatus(runId, ['succeeded', 'failed']);
    expect(done.status).toBe('failed');
    // The run's end is written before its execution's last line.
    const ended = await eventually(
      async () =>
        captured.lines.filter(
          (line) => line.run_id === runId && String(line.msg).startsWith('execution ended'),
        ),
      (found) => found.length > 0,
      5_000,
    );
    expect(ended).toHaveLength(1);
    expect(ended[0]).toMatchObject({ end: 'failed', status: 'failed', code: done.error.code });
    expect(ended[0]?.msg).toBe(`execution ended: failed ${done.error.code}`);
    // Its job's failure, logged by the queue's worker, names the run too.
    const jobFailed = await eventually(
      async () => captured.lines.filter((line) => line.msg === 'job failed' && line.queue === 'runs'),
      (found) => found.length > 0,
      5_000,
    );
    expect(jobFailed.map((line) => line.run_id)).toContain(runId);
  }, 30_000);
  it('logs a run failed provider_unavailable after its browser worker stayed away with that code, not internal_error', async () => {
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'wait' });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    // A run no worker sees (never enqueued), settled here as its executions would settle it.
    const { run } = await fleet.store.submitRun({
      tenant: 'dev',
      principal: 'dev',
      sessionId: session.body.id,
      input: { text: 'never served' },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    const away = new BrowserWorkerAway('no live browser worker serves profile gone');
    const lifecycle = new RunLifecycle({ store: fleet.store, enqueue: async () => undefined });
    const deps = { store: fleet.store, lifecycle, logger: captured.logger };
    let settled: Awaited<ReturnType<typeof settleEscapedError>> | undefined;
    for (let execution = 0; execution <= MAX_FAULT_HANDBACKS; execution += 1) {
      const claim = await fleet.store.claimRun(run.id, 1, `owner-${execution}`);
      if (!claim.ok) throw new Error(`claim ${execution} refused`);
      settled = await settleEscapedError(deps, claim.run, `owner-${execution}`, away);
    }
    expect(settled).toMatchObject({ kind: 'failed', code: 'provider_unavailable' });
    const failedLines = captured.lines.filter((line) => line.run_id === run.id && line.level >= 50);
    expect(failedLines).toHaveLength(1);
    expect(failedLines[0]).toMatchObject({ code: 'provider_unavailable' });
    expect(failedLines[0]?.msg).toContain('failed provider_unavailable');
    expect(failedLines[0]?.msg).not.toContain('internal_error');
  });
});

describe('the ops servers of the run worker and the sweeper', () => {
  it('count their requests as server `ops` and log probes at debug', async () => {
    const captured = capturingLogger('debug');
    const metrics = createMetrics();
    const ops = createOpsServer(captured.logger, metrics.registry, () => []);
    const url = await ops.listen({ host: '127.0.0.1', port: 0 });
    try {
      const response = await fetch(`${url}/metrics`, { headers: { 'x-request-id': 'scrape-1' } });
      await response.text();
      expect(response.headers.get('x-request-id')).toBe('scrape-1');
      expect(await answeredLines(captured.lines, 'scrape-1')).toMatchObject([
        { level: DEBUG, msg: 'request answered', component: 'ops-http', route: '/metrics', status: 200 },
      ]);
      // Counted in the same hook as the line, which has been written.
      expect(
        await seriesValue(metrics.registry, 'leasehold_http_requests_total', {
          server: 'ops',
          route: '/metrics',
          status: '200',
        }),
      ).toBe(1);
    } finally {
      await ops.close();
    }
  });
});

describe('the sweeper’s lines about runs', () => {
  it('names each reclaimed run by its run_id', async () => {
    const prefix = uniquePrefix('reqlog-sweep');
    const redis = new Redis(testRedisUrl());
    const store = new RunStore(redis, `${prefix}:`);
    const queue = createRunsQueue(redis, prefix);
    const captured = capturingLogger('info');
    try {
      const sessionId = await createTestSession(store, 'acme', { instructions: 'answer' });
      const { run } = await store.submitRun({
        tenant: 'acme',
        principal: 'alice',
        sessionId,
        input: null,
        limits: TEST_RUN_LIMITS,
        timeoutMs: 600_000,
      });
      ran(await store.claimRun(run.id, 1, 'dead-worker'));
      // BullMQ fails a job with this reason once it stalled past the worker retry limit.
      const worker = await createQueueWorker<RunJob, void>(
        RUNS_QUEUE,
        async () => {
          throw new Error('job stalled more than allowable limit');
        },
        {
          redisUrl: testRedisUrl(),
          prefix,
          concurrency: 1,
          lockDurationMs: 30_000,
          stalledIntervalMs: 30_000,
          maxStalledCount: 1,
          logger: captured.logger,
        },
      );
      await enqueueRun(queue, { runId: run.id, execution: 1, enqueuedAtMs: Date.now() });
      await eventually(
        () => queue.getFailedCount(),
        (count) => count === 1,
        10_000,
      );
      await worker.close();
      const sweeper = await startTestSweeper(prefix, { logger: captured.logger, metrics: createMetrics() });
      try {
        const reclaimed = await eventually(
          async () => captured.lines.filter((line) => /reclaimed/.test(line.msg)),
          (found) => found.length > 0,
          10_000,
        );
        expect(reclaimed).toMatchObject([{ run_id: run.id }]);
      } finally {
        await sweeper.close();
      }
      // The queue worker's own line of the job's failure names the run as well.
      expect(captured.lines.filter((line) => line.msg === 'job failed')).toMatchObject([{ run_id: run.id }]);
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
      await deletePrefixedKeys(redis, prefix);
      redis.disconnect();
    }
  }, 30_000);
});
