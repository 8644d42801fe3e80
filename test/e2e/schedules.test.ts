import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { runCli } from '../../apps/cli/program.js';
import { type RunWorkerHandle, startRunWorker } from '../../apps/run-worker/run-worker.js';
import { type Config, loadConfig } from '../../libs/config/index.js';
import { createMetrics, type Metrics } from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { eventually } from '../fixtures/eventually.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const EVERY_MS = 2_000;

/** The settings every role of this file starts with: a lowered minimum, so a schedule may fire every 2 s. */
function settings(prefix: string): Record<string, string> {
  return {
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    PORT: '0',
    LOG_LEVEL: 'silent',
    LEASEHOLD_BROWSER_TOOLS: 'off',
    SCHEDULE_MIN_INTERVAL_MS: '1000',
    RUN_LOCK_DURATION_MS: '2000',
    RUN_STALLED_INTERVAL_MS: '1000',
    SHUTDOWN_TIMEOUT_MS: '3000',
  };
}

/** Resolves once the wall clock reads `ms` or later. */
async function clockPasses(ms: number): Promise<void> {
  await eventually(
    async () => Date.now(),
    (now) => now >= ms,
    Math.max(0, ms - Date.now()) + 5_000,
    100,
  );
}

describe('schedules: runs submitted on an interval by BullMQ job schedulers, each due time once', () => {
  const prefix = uniquePrefix('schedules');
  const env = settings(prefix);
  const config: Config = loadConfig(env);
  let api: ApiHandle;
  let runWorker: RunWorkerHandle | undefined;
  let metrics: Metrics;
  let apiKey: string;
  let sessionId: string;
  /** While set, every run execution waits here: the schedule's run is still going. */
  let hold: Promise<void> | undefined;
  let releaseHold: () => void = () => {};
  const { call } = restClient(
    () => `${api.url}/v1`,
    () => apiKey,
  );

  async function startWorker(): Promise<RunWorkerHandle> {
    return startRunWorker({
      config,
      logger: silentLogger(),
      metrics,
      redisUrl: testRedisUrl(),
      faults: () => hold,
    });
  }

  beforeAll(async () => {
    metrics = createMetrics({ role: 'run-worker' });
    api = await startTestApi(prefix, env);
    runWorker = await startWorker();
    apiKey = (
      await api.store.createApiKey({
        tenant: 'sched',
        principal: 'ann',
        scopes: ['runs:write', 'runs:read', 'admin'],
      })
    ).key;
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'Answer.', tools: [] });
    expect(agent.status).toBe(201);
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    expect(session.status).toBe(201);
    sessionId = session.body.id;
  }, 60_000);

  afterAll(async () => {
    releaseHold();
    hold = undefined;
    await runWorker?.close();
    await api?.close();
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-schedules-cleanup');
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  function everyTwoSeconds(overlap: 'skip' | 'queue', input: string) {
    return {
      every_ms: EVERY_MS,
      run: { session_id: sessionId, input, script: { steps: [], answer: 'Done.' }, limits: { max_steps: 3 } },
      overlap,
    };
  }

  // biome-ignore lint/suspicious/noExplicitAny: run views, asserted field by field.
  async function runsOf(scheduleId: string): Promise<any[]> {
    const answer = await call('GET', `/v1/schedules/${scheduleId}/runs`);
    expect(answer.status).toBe(200);
    return answer.body.runs;
  }

  // biome-ignore lint/suspicious/noExplicitAny: a schedule view, asserted field by field.
  async function scheduleView(scheduleId: string): Promise<any> {
    const answer = await call('GET', `/v1/schedules/${scheduleId}`);
    expect(answer.status).toBe(200);
    return answer.body;
  }

  it('refuses a schedule firing more often than the minimum, and one past the browser-task limits', async () => {
    const tooOften = await call('POST', '/v1/schedules', { ...everyTwoSeconds('skip', 'x'), every_ms: 500 });
    expect(tooOften.status).toBe(422);
    expect(tooOften.body.error.message).toMatch(/at least 1000 ms/);
    const tooMuch = everyTwoSeconds('skip', 'x');
    const refused = await call('POST', '/v1/schedules', {
      ...tooMuch,
      run: { ...tooMuch.run, limits: { max_steps: config.limits.browser_task.max_steps + 1 } },
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/browser-task limit/);
  });

  it('fires every 2 s through restarts of the API and the run worker: no due time twice, the missed ones fired once on recovery', async () => {
    const created = await call('POST', '/v1/schedules', everyTwoSeconds('skip', 'Restarts'));
    expect(created.status).toBe(201);
    const scheduleId: string = created.body.id;
    expect(created.body.next_due_at_ms.length).toBeGreaterThan(0);

    const fired = await eventually(
      () => runsOf(scheduleId),
      (runs) => runs.length >= 2,
      30_000,
    );
    expect(fired.length).toBeGreaterThanOrEqual(2);
    // Each fired run carries its schedule and due time, and the schedule's own limits.
    expect(fired[0].input.schedule.id).toBe(scheduleId);
    expect(typeof fired[0].input.schedule.due_at_ms).toBe('number');
    expect(fired[0].limits.max_steps).toBe(3);

    // The API restarts while the run worker keeps firing.
    await api.close();
    const before = (await eventually(
      async () => {
        const redis = await connectRedis(testRedisUrl(), 'producer', 'test-schedules-count');
        try {
          return await redis.zcard(`${prefix}:{sch:${scheduleId}}:runs`);
        } finally {
          await closeRedis(redis);
        }
      },
      (count) => count >= fired.length + 1,
      30_000,
    )) as number;
    expect(before).toBeGreaterThanOrEqual(fired.length + 1);
    api = await startTestApi(prefix, env);

    // No worker runs for at least three intervals: those due times are missed; one fires on recovery.
    await runWorker?.close();
    runWorker = undefined;
    const stoppedAtMs = Date.now();
    // The one fire job BullMQ keeps while nobody takes it: the due time that fires on recovery.
    const pendingDue: number = (await scheduleView(scheduleId)).next_due_at_ms[0];
    await clockPasses(Math.max(stoppedAtMs, pendingDue) + 3 * EVERY_MS + 500);
    runWorker = await startWorker();
    const restartedAtMs = Date.now();

    const recovered = await eventually(
      () => scheduleView(scheduleId),
      (view) => view.counts.missed >= 2 && view.counts.fired >= before + 2,
      30_000,
    );
    expect(recovered.counts.missed).toBeGreaterThanOrEqual(2);
    expect((await call('POST', `/v1/schedules/${scheduleId}/pause`)).status).toBe(200);

    // Once a fire in flight has landed, every fired due time has its run, and only one.
    const settled = await eventually(
      async () => ({ view: await scheduleView(scheduleId), runs: await runsOf(scheduleId) }),
      ({ view, runs }) => view.counts.fired === runs.length,
      10_000,
    );
    const { runs } = settled;
    expect(settled.view.counts.fired).toBe(runs.length);
    const dueTimes: number[] = runs.map((run) => run.input.schedule.due_at_ms);
    expect(new Set(dueTimes).size).toBe(dueTimes.length);
    // Of the due times from the one pending at the stop until the restart, one has a run: the one
    // fired on recovery; the others were counted missed.
    const dueWhileAway = dueTimes.filter(
      (due) => due >= Math.min(pendingDue, stoppedAtMs) && due < restartedAtMs,
    );
    expect(dueWhileAway).toEqual([pendingDue]);
    for (const run of runs) {
      const ended = await eventually(
        () => call('GET', `/v1/runs/${run.id}`),
        (answer) => answer.body.status === 'succeeded',
        30_000,
      );
      expect(ended.body.status).toBe('succeeded');
    }
    const series = await metrics.registry.getSingleMetricAsString('leasehold_schedule_fires_total');
    expect(series).toMatch(/outcome="fired"/);
    expect(series).toMatch(/outcome="missed"/);
    expect((await call('DELETE', `/v1/schedules/${scheduleId}`)).status).toBe(204);
  }, 120_000);

  it('lists uploaded files in each run it fires and holds them while it exists; an unknown one is refused', async () => {
    const form = new FormData();
    form.append('file', new Blob(['claim,amount\nA-1,12.50\n'], { type: 'text/csv' }), 'claims.csv');
    const uploaded = await fetch(`${api.url}/v1/files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}` },
      body: form,
    });
    expect(uploaded.status).toBe(201);
    const fileId: string = ((await uploaded.json()) as { id: string }).id;

    const base = everyTwoSeconds('skip', 'With files');
    const unknown = await call('POST', '/v1/schedules', {
      ...base,
      run: { ...base.run, files: ['fil_nosuchfileatall0000'] },
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.message).toContain('fil_nosuchfileatall0000');

    const created = await call('POST', '/v1/schedules', { ...base, run: { ...base.run, files: [fileId] } });
    expect(created.status).toBe(201);
    expect(created.body.run.files).toEqual([fileId]);
    // Held by the schedule: it no longer expires 7 days after it was made.
    expect((await call('GET', `/v1/files/${fileId}`)).body.expires_at_ms).toBeNull();
    const [run] = await eventually(
      () => runsOf(created.body.id),
      (runs) => runs.length >= 1,
      30_000,
    );
    expect(run.input.files).toEqual([fileId]);
    expect((await call('DELETE', `/v1/schedules/${created.body.id}`)).status).toBe(204);
  });

  it('skips a due time while the schedule’s previous run is still going (overlap: skip)', async () => {
    hold = new Promise<void>((resolve) => {
      releaseHold = resolve;
    });
    const created = await call('POST', '/v1/schedules', everyTwoSeconds('skip', 'Overlap'));
    const scheduleId: string = created.body.id;
    const skipping = await eventually(
      () => scheduleView(scheduleId),
      (view) => view.counts.skipped_overlap >= 2,
      30_000,
    );
    expect(skipping.counts.skipped_overlap).toBeGreaterThanOrEqual(2);
    const [only] = await runsOf(scheduleId);
    expect((await runsOf(scheduleId)).length).toBe(1);
    expect(['queued', 'running']).toContain(only.status);

    hold = undefined;
    releaseHold();
    const after = await eventually(
      () => runsOf(scheduleId),
      (runs) => runs.length >= 2,
      30_000,
    );
    expect(after.length).toBeGreaterThanOrEqual(2);
    await call('POST', `/v1/schedules/${scheduleId}/pause`);
  }, 90_000);

  it('holds one due time while the previous run goes on, and submits it when that run ends (overlap: queue)', async () => {
    hold = new Promise<void>((resolve) => {
      releaseHold = resolve;
    });
    const created = await call('POST', '/v1/schedules', everyTwoSeconds('queue', 'Queue'));
    const scheduleId: string = created.body.id;
    const holding = await eventually(
      () => scheduleView(scheduleId),
      (view) => view.counts.queued === 1 && view.counts.skipped_overlap >= 1,
      30_000,
    );
    expect(holding.counts.queued).toBe(1);
    const heldDue: number = holding.held_due_at_ms;
    expect(typeof heldDue).toBe('number');
    expect((await runsOf(scheduleId)).length).toBe(1);

    hold = undefined;
    releaseHold();
    const runs = await eventually(
      () => runsOf(scheduleId),
      (found) => found.some((run) => run.input.schedule.due_at_ms === heldDue),
      30_000,
    );
    expect(runs.map((run) => run.input.schedule.due_at_ms)).toContain(heldDue);
    await call('POST', `/v1/schedules/${scheduleId}/pause`);
  }, 90_000);

  it('pauses and resumes, keeps schedules to their tenant, and pauses one whose key is revoked', async () => {
    const created = await call('POST', '/v1/schedules', {
      cron: '0 7 * * *',
      timezone: 'Europe/Berlin',
      run: { session_id: sessionId, input: 'Briefing' },
    });
    expect(created.status).toBe(201);
    const scheduleId: string = created.body.id;
    expect(created.body.next_due_at_ms).toHaveLength(5);
    expect(new Date(created.body.next_due_at_ms[0]).getUTCMinutes()).toBe(0);

    const other = (await api.store.createApiKey({ tenant: 'elsewhere', principal: 'eve', scopes: ['admin'] }))
      .key;
    expect((await call('GET', `/v1/schedules/${scheduleId}`, undefined, { key: other })).status).toBe(404);
    expect((await call('POST', `/v1/schedules/${scheduleId}/pause`, undefined, { key: other })).status).toBe(
      404,
    );
    expect((await call('GET', '/v1/schedules', undefined, { key: other })).body.schedules).toEqual([]);

    const paused = await call('POST', `/v1/schedules/${scheduleId}/pause`);
    expect(paused.body).toMatchObject({ paused: true, paused_reason: 'requested', next_due_at_ms: [] });
    const resumed = await call('POST', `/v1/schedules/${scheduleId}/resume`);
    expect(resumed.body.paused).toBe(false);
    expect(resumed.body.next_due_at_ms).toHaveLength(5);
    const patched = await call('PATCH', `/v1/schedules/${scheduleId}`, { cron: '30 6 * * *' });
    expect(patched.status).toBe(200);
    expect(new Date(patched.body.next_due_at_ms[0]).getUTCMinutes()).toBe(30);

    // A key that makes a schedule and is then revoked: the schedule's next fire pauses it.
    const maker = await api.store.createApiKey({
      tenant: 'sched',
      principal: 'bob',
      scopes: ['runs:write', 'runs:read'],
    });
    const made = await call('POST', '/v1/schedules', everyTwoSeconds('skip', 'Revoked'), { key: maker.key });
    expect(made.status).toBe(201);
    await api.store.revokeApiKey('sched', maker.identity.key_id);
    const stopped = await eventually(
      () => scheduleView(made.body.id),
      (view) => view.paused_reason === 'key_revoked',
      30_000,
    );
    expect(stopped).toMatchObject({ paused: true, paused_reason: 'key_revoked', next_due_at_ms: [] });
    expect((await call('POST', `/v1/schedules/${made.body.id}/resume`)).status).toBe(409);
  }, 60_000);

  it('is made, listed, paused and deleted from the command line', async () => {
    const leasehold = async (args: string[]) => {
      let stdout = '';
      let stderr = '';
      const code = await runCli(args, {
        env: { apiUrl: api.url, apiKey },
        stdout: { write: (text: string) => (stdout += text) },
        stderr: { write: (text: string) => (stderr += text) },
      });
      return { code, stdout, stderr };
    };
    const created = await leasehold([
      'schedules',
      'create',
      '--session',
      sessionId,
      '--cron',
      '0 7 * * 1-5',
      '--timezone',
      'Europe/Berlin',
      '--input',
      'Morning briefing',
      '--json',
    ]);
    expect(created).toMatchObject({ code: 0, stderr: '' });
    const schedule = JSON.parse(created.stdout);
    expect(schedule).toMatchObject({ cron: '0 7 * * 1-5', timezone: 'Europe/Berlin', paused: false });
    const listed = await leasehold(['schedules', 'list']);
    expect(listed.stdout).toContain(`${schedule.id}  cron "0 7 * * 1-5" Europe/Berlin  overlap skip  next `);
    expect((await leasehold(['schedules', 'pause', schedule.id])).stdout).toContain('paused (requested)');
    expect(await leasehold(['schedules', 'runs', schedule.id])).toMatchObject({ code: 0, stdout: '' });
    expect((await leasehold(['schedules', 'delete', schedule.id])).stdout).toBe(`${schedule.id} deleted\n`);
    expect((await call('GET', `/v1/schedules/${schedule.id}`)).status).toBe(404);
    const both = await leasehold([
      'schedules',
      'create',
      '--session',
      sessionId,
      '--cron',
      '0 7 * * *',
      '--every',
      '60000',
      '--input',
      'x',
    ]);
    expect(both.code).toBe(2);
  });

  it("is made, listed and paused through MCP's runs mode, as the caller's key", async () => {
    const client = new Client({ name: 'schedules-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${api.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${apiKey}` } },
      }),
    );
    try {
      // biome-ignore lint/suspicious/noExplicitAny: tool answers, asserted field by field.
      const tool = async (name: string, args: Record<string, unknown>): Promise<any> => {
        const result = await client.callTool({ name, arguments: args });
        const content = result.content as Array<{ text: string }>;
        return { isError: result.isError === true, body: JSON.parse(content[0]?.text ?? 'null') };
      };
      const made = await tool('create_schedule', {
        session_id: sessionId,
        input: 'Weekly digest',
        cron: '0 9 * * 1',
        timezone: 'Europe/Paris',
      });
      expect(made).toMatchObject({ isError: false, body: { cron: '0 9 * * 1', timezone: 'Europe/Paris' } });
      const listed = await tool('list_schedules', {});
      expect(listed.body.schedules.map((schedule: { id: string }) => schedule.id)).toContain(made.body.id);
      const paused = await tool('set_schedule', { schedule_id: made.body.id, action: 'pause' });
      expect(paused.body).toMatchObject({ paused: true, paused_reason: 'requested' });
      expect(await tool('list_schedule_runs', { schedule_id: made.body.id })).toEqual({
        isError: false,
        body: { runs: [] },
      });
      const tooOften = await tool('create_schedule', { session_id: sessionId, input: 'x', every_ms: 10 });
      expect(tooOften).toMatchObject({ isError: true, body: { error: { code: 'validation_failed' } } });
    } finally {
      await client.close();
    }
  });
});
