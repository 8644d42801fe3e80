import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunStore } from '../../libs/store/index.js';
import { METRICS, type Role } from '../../libs/telemetry/catalogue.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { freePort } from '../chaos/own-redis.js';
import { RoleProcess } from '../chaos/role-processes.js';
import { eventually } from '../fixtures/eventually.js';
import { type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { type PaySite, payOnceSteps, startPaySite } from '../fixtures/pay-site.js';
import { deletePrefixedKeys, uniquePrefix } from '../fixtures/redis.js';

const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const ENDED = new Set(['succeeded', 'failed', 'cancelled']);
const STANDARD = /^(process|nodejs)_/;
const MODEL_API_KEY = 'metrics-test-key';
const dataPlaneToken = randomBytes(32).toString('base64url');

/** One fleet's worth of processes on its own key prefix, driven through its API. */
interface Deployment {
  prefix: string;
  apiKey: string;
  apiPort: number;
}

/** A process's `/metrics` as text (throws with the status when it is not served). */
async function scrape(port: number): Promise<string> {
  const response = await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(10_000) });
  if (response.status !== 200) throw new Error(`/metrics on ${port} answered ${response.status}`);
  return response.text();
}

/** `promtool check metrics` on `text`: its exit status and everything it printed. */
function promtool(text: string): { status: number | null; output: string } {
  const checked = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  return { status: checked.status, output: `${checked.stdout}${checked.stderr}`.trim() };
}

/** Metric names as the exposition's TYPE lines declare them. */
function declared(text: string): string[] {
  return [...text.matchAll(/^# TYPE (\S+) /gm)].map((match) => match[1] as string);
}

/** The sum of a sample's values over its series whose labels include every `labels` pair. */
function total(text: string, sample: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    const match = /^([a-z_:]+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!match || match[1] !== sample) continue;
    const series = Object.fromEntries(
      [...(match[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]),
    );
    if (Object.entries(labels).every(([name, value]) => series[name] === value)) sum += Number(match[3]);
  }
  return sum;
}

function catalogueNames(role: Role | 'fleet'): string[] {
  return Object.values(METRICS)
    .filter((entry) => role === 'fleet' || (entry.roles as readonly Role[]).includes(role))
    .map((entry) => entry.name)
    .sort();
}

/**
 * `promtool check metrics` passes on a live `/metrics` of every role — each
 * role as its own process, and the fleet of `npm start` — after runs went through; each serves
 * exactly its catalogue entries beside the standard series, and the new series carry data.
 */
describe('every role’s /metrics, read live', { timeout: 120_000 }, () => {
  let model: ModelServer;
  let site: PaySite;
  let opsDir = '';
  const processes: Record<string, RoleProcess> = {};
  let roles: Deployment;
  let fleet: Deployment;
  let fleetBrowserPort = 0;

  async function call(deployment: Deployment, method: string, path: string, body?: unknown) {
    const response = await fetch(`http://127.0.0.1:${deployment.apiPort}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${deployment.apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    // biome-ignore lint/suspicious/noExplicitAny: REST answers of many shapes, read field by field.
    return { status: response.status, body: (text ? JSON.parse(text) : undefined) as any };
  }

  /** Polls a run until `done` holds for its view (or 30 s pass), and answers the view. */
  // biome-ignore lint/suspicious/noExplicitAny: a run view, read field by field.
  async function runUntil(deployment: Deployment, runId: string, done: (run: any) => boolean) {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const view = await call(deployment, 'GET', `/v1/runs/${runId}`);
      if (done(view.body) || Date.now() > deadline) return view.body;
      await sleep(200);
    }
  }

  /** A run of the priced test model that answers at once: tokens, cost, queue wait, duration. */
  async function modelRun(deployment: Deployment): Promise<string> {
    const session = await call(deployment, 'POST', '/v1/sessions', { model: 'tester' });
    expect(session.status).toBe(201);
    const run = await call(deployment, 'POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Say done.',
    });
    expect(run.status).toBe(201);
    return (await runUntil(deployment, run.body.id, (view) => ENDED.has(view.status))).status;
  }

  beforeAll(async () => {
    model = await startModelServer({
      apiKey: MODEL_API_KEY,
      policy: () => ({
        content: 'done',
        usage: { prompt_tokens: 120, completion_tokens: 8, cached_tokens: 20 },
      }),
    });
    site = await startPaySite();
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  tester:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: TESTER_API_KEY
    input_usd_per_mtok: "2.5"
    cached_input_usd_per_mtok: "1.25"
    output_usd_per_mtok: "10"
    context_window_tokens: 100000
`);
    const [api, worker, sweeper, browser, fleetApi, fleetBrowser] = await Promise.all(
      Array.from({ length: 6 }, () => freePort()),
    );
    fleetBrowserPort = fleetBrowser as number;
    const common = {
      REDIS_URL,
      LEASEHOLD_OPS_DIR: opsDir,
      TESTER_API_KEY: MODEL_API_KEY,
      LEASEHOLD_DATA_PLANE_TOKEN: dataPlaneToken,
      LEASEHOLD_SEAL_KEY: randomBytes(32).toString('base64'),
      ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      LOG_LEVEL: 'info',
      LOG_PRETTY: 'false',
    };
    const rolesPrefix = uniquePrefix('metrics-roles');
    const fleetPrefix = uniquePrefix('metrics-fleet');
    const rolesEnv = { ...common, LEASEHOLD_KEY_PREFIX: `${rolesPrefix}:`, QUEUE_PREFIX: rolesPrefix };
    processes.api = new RoleProcess('api', 'apps/api/main.ts', api as number, {
      ...rolesEnv,
      PORT: String(api),
    });
    processes['run-worker'] = new RoleProcess('run-worker', 'apps/run-worker/main.ts', worker as number, {
      ...rolesEnv,
      RUN_WORKER_PORT: String(worker),
    });
    processes.sweeper = new RoleProcess('sweeper', 'apps/sweeper/main.ts', sweeper as number, {
      ...rolesEnv,
      SWEEPER_PORT: String(sweeper),
    });
    processes['browser-worker'] = new RoleProcess(
      'browser-worker',
      'apps/browser-worker/main.ts',
      browser as number,
      { ...rolesEnv, BROWSER_WORKER_PORT: String(browser), BROWSER_WORKER_PROFILES: '*' },
    );
    processes.fleet = new RoleProcess('fleet', 'apps/fleet/main.ts', fleetApi as number, {
      ...common,
      LEASEHOLD_KEY_PREFIX: `${fleetPrefix}:`,
      QUEUE_PREFIX: fleetPrefix,
      PORT: String(fleetApi),
      BROWSER_WORKER_PORT: String(fleetBrowser),
    });
    // Each deployment's first key, straight into the store as `npm run api-key` makes it.
    const redis = await connectRedis(REDIS_URL, 'producer', 'metrics-test-keys');
    const keyOf = async (prefix: string) =>
      (
        await new RunStore(redis, `${prefix}:`).createApiKey({
          tenant: 'metrics',
          principal: 'metrics',
          scopes: ['admin', 'runs:write', 'runs:read', 'approvals:write'],
        })
      ).key;
    roles = { prefix: rolesPrefix, apiKey: await keyOf(rolesPrefix), apiPort: api as number };
    fleet = { prefix: fleetPrefix, apiKey: await keyOf(fleetPrefix), apiPort: fleetApi as number };
    await closeRedis(redis);
    await Promise.all(Object.values(processes).map((role) => role.ready(90_000)));
  }, 110_000);

  afterAll(async () => {
    await Promise.all(Object.values(processes).map((role) => role.stop('SIGTERM', 10_000)));
    await model?.close();
    await site?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    const redis = await connectRedis(REDIS_URL, 'producer', 'metrics-test-cleanup');
    for (const deployment of [roles, fleet])
      if (deployment) await deletePrefixedKeys(redis, deployment.prefix);
    await closeRedis(redis);
  });

  it('passes promtool on every role, serves each series once, and the new series carry data', async () => {
    // A model run on each deployment, and on the roles' one a browser run parked on its approval.
    expect(await modelRun(roles)).toBe('succeeded');
    expect(await modelRun(fleet)).toBe('succeeded');
    expect(
      (await call(roles, 'POST', '/v1/profiles', { id: 'shop', allowed_origins: [site.origin] })).status,
    ).toBe(201);
    const agent = await call(roles, 'POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Pay once.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call(roles, 'POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'shop',
    });
    const submitted = await call(roles, 'POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Pay once',
      script: { steps: payOnceSteps(`${site.origin}/run/metrics`), answer: 'Paid.' },
    });
    expect(submitted.status).toBe(201);
    const runId = submitted.body.id as string;
    expect(
      (await runUntil(roles, runId, (view) => view.status === 'parked' || ENDED.has(view.status))).status,
    ).toBe('parked');
    const [approval] = (await call(roles, 'GET', `/v1/approvals?run_id=${runId}`)).body.approvals;
    expect((await call(roles, 'POST', `/v1/approvals/${approval.id}/approve`, {})).status).toBe(200);
    expect((await runUntil(roles, runId, (view) => ENDED.has(view.status))).status).toBe('succeeded');

    // A run's view says `succeeded` once its end is stored; the run worker counts the end right
    // after, so the scrape waits for both runs' ends to be counted (at most a few seconds).
    const runWorkerPort = (processes['run-worker'] as RoleProcess).port;
    await eventually(
      () => scrape(runWorkerPort),
      (text) => total(text, 'leasehold_runs_ended_total', { status: 'succeeded', code: 'none' }) >= 2,
      10_000,
    );
    const texts: Record<string, string> = {};
    for (const [name, role] of Object.entries(processes)) texts[name] = await scrape(role.port);
    for (const [name, text] of Object.entries(texts)) {
      expect({ name, promtool: promtool(text) }).toEqual({ name, promtool: { status: 0, output: '' } });
      const names = declared(text);
      expect({ name, series: names.filter((metric) => !STANDARD.test(metric)).sort() }).toEqual({
        name,
        series: catalogueNames(name as Role | 'fleet'),
      });
      // Standard names for standard series (stock Node.js dashboards), no prefix.
      expect({ name, standard: names.includes('process_cpu_user_seconds_total') }).toEqual({
        name,
        standard: true,
      });
    }
    // In the fleet the API alone serves the shared registry: the browser worker's data plane has
    // no /metrics (404 to a caller with its token; default-deny answers 401 to one without).
    const fleetDataPlane = await fetch(`http://127.0.0.1:${fleetBrowserPort}/metrics`, {
      headers: { authorization: `Bearer ${dataPlaneToken}` },
    });
    expect(fleetDataPlane.status).toBe(404);

    const worker = texts['run-worker'] as string;
    const api = texts.api as string;
    const fleetText = texts.fleet as string;
    for (const text of [worker, fleetText]) {
      expect(total(text, 'leasehold_run_queue_wait_seconds_count')).toBeGreaterThanOrEqual(1);
      expect(
        total(text, 'leasehold_run_duration_seconds_count', { status: 'succeeded' }),
      ).toBeGreaterThanOrEqual(1);
      expect(total(text, 'leasehold_model_calls_total', { model: 'tester', result: 'ok' })).toBe(1);
      expect(total(text, 'leasehold_model_tokens_total', { model: 'tester', kind: 'input' })).toBe(100);
      expect(total(text, 'leasehold_model_tokens_total', { model: 'tester', kind: 'cached_input' })).toBe(20);
      expect(total(text, 'leasehold_model_tokens_total', { model: 'tester', kind: 'output' })).toBe(8);
      // 100 × 2.5 + 20 × 1.25 + 8 × 10 = 355 µUSD.
      expect(total(text, 'leasehold_model_cost_usd_total', { model: 'tester' })).toBeCloseTo(0.000355, 9);
      expect(total(text, 'leasehold_model_call_seconds_count', { model: 'tester' })).toBe(1);
    }
    // The browser run: two executions claimed (submit, resume after the approval), its end by status.
    expect(total(worker, 'leasehold_run_queue_wait_seconds_count')).toBe(3);
    expect(total(worker, 'leasehold_runs_ended_total', { status: 'succeeded', code: 'none' })).toBe(2);
    expect(total(api, 'leasehold_approval_wait_seconds_count', { decision: 'approved' })).toBe(1);
    expect(total(texts['browser-worker'] as string, 'leasehold_settle_total')).toBeGreaterThanOrEqual(1);
  });
});
