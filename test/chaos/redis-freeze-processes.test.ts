import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { type PaySite, payOnceSteps, startPaySite } from '../fixtures/pay-site.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { freePort, OwnRedis } from './own-redis.js';
import { RoleProcess } from './role-processes.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

const TENANT = 'frz';
const RUNS = 4;
/** Acts per run, each on its own page: a run is mid-script for most of its life. */
const ACTS = 4;
const FREEZE_MS = 15_000;
/** A freeze the job locks outlive. */
const SHORT_FREEZE_MS = 5_000;
/** The bound the issue sets on noticing a freeze, from SIGSTOP to each role's first 503. */
const NOTICE_BOUND_MS = 3_000;
const ENDED = new Set(['succeeded', 'failed', 'cancelled']);
/** A job lock shorter than the freeze, so every lock held at the freeze lapses during it. */
const TIMINGS = {
  RUN_LOCK_DURATION_MS: '10000',
  RUN_STALLED_INTERVAL_MS: '2000',
  SWEEP_INTERVAL_MS: '1000',
  LEASE_UPKEEP_INTERVAL_MS: '1000',
  LEASE_EXPIRY_SWEEP_INTERVAL_MS: '1000',
  BROWSER_WORKER_HEARTBEAT_MS: '1000',
  SHUTDOWN_TIMEOUT_MS: '6000',
};

// biome-ignore lint/suspicious/noExplicitAny: REST answers of many shapes, read field by field.
type Answer = { status: number; body: any; ms: number };

/** The JSON lines of a role's output that tell its Redis link changing (`redis: down | up`). */
function linkLines(role: RoleProcess): string[] {
  return role
    .output()
    .split('\n')
    .filter((line) => line.startsWith('{') && line.includes('"redis"'))
    .map((line) => (JSON.parse(line) as { redis?: string }).redis)
    .filter((state): state is string => state === 'down' || state === 'up');
}

/**
 * A Redis that freezes (SIGSTOP for 15 s: its connections stay open and nothing answers, as in a
 * partition without resets) while runs are mid-script, every role its own process: each role tells
 * the outage (`/readyz` 503, one `down` line) within 3 s, the API refuses at once instead of
 * hanging, no call goes out on a job lock in doubt, and after the thaw every run succeeds with one
 * payment per act and each role says `up` once.
 */
describe('a frozen Redis, seen by each role as a process', { timeout: 300_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-redis-freeze-'));
  const artifactsDir = mkdtempSync(join(tmpdir(), 'lh-redis-freeze-artifacts-'));
  const dumpDir = mkdtempSync(join(tmpdir(), 'lh-redis-freeze-dump-'));
  let redis: OwnRedis;
  let site: PaySite;
  let opsDir = '';
  let apiKey = '';
  const roles: Record<string, RoleProcess> = {};
  let failed = false;

  async function call(method: string, path: string, body?: unknown, timeoutMs = 10_000): Promise<Answer> {
    const startedAtMs = Date.now();
    try {
      const response = await fetch(`http://127.0.0.1:${roles.api?.port}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${apiKey}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        signal: AbortSignal.timeout(timeoutMs),
      });
      const text = await response.text();
      return {
        status: response.status,
        body: text ? JSON.parse(text) : undefined,
        ms: Date.now() - startedAtMs,
      };
    } catch (error) {
      return { status: 0, body: { error: String(error) }, ms: Date.now() - startedAtMs };
    }
  }

  /** Approves whatever is pending with a grant for the rest of the run, until `stop()`. */
  function approver(): { stop(): Promise<void> } {
    let stopped = false;
    const loop = (async () => {
      while (!stopped) {
        const pending = await call('GET', '/v1/approvals');
        for (const approval of pending.body?.approvals ?? [])
          await call('POST', `/v1/approvals/${approval.id}/approve`, {
            grant: { duration_ms: 600_000, max_actions: 20 },
          });
        await sleep(250);
      }
    })();
    return {
      stop() {
        stopped = true;
        return loop;
      },
    };
  }

  beforeAll(async () => {
    redis = new OwnRedis(await freePort(), dir);
    await redis.start();
    site = await startPaySite();
    opsDir = writeOpsDir(SCRIPTED_MODELS_YAML);
    const prefix = uniquePrefix('redis-freeze');
    const env: Record<string, string> = {
      REDIS_URL: redis.url,
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: randomBytes(32).toString('base64url'),
      LEASEHOLD_SEAL_KEY: randomBytes(32).toString('base64'),
      LEASEHOLD_ARTIFACTS_DIR: artifactsDir,
      LEASEHOLD_OPS_DIR: opsDir,
      ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      LOG_LEVEL: 'info',
      LOG_PRETTY: 'false',
      API_RATE_PER_SECOND: '100000',
      API_RATE_BURST: '100000',
      ...TIMINGS,
    };
    const port = async () => freePort();
    const api = await port();
    roles.api = new RoleProcess('api', 'apps/api/main.ts', api, { ...env, PORT: String(api) });
    for (const index of [0, 1]) {
      const worker = await port();
      roles[`run${index}`] = new RoleProcess(`run-worker-${index}`, 'apps/run-worker/main.ts', worker, {
        ...env,
        RUN_WORKER_PORT: String(worker),
      });
    }
    const browser = await port();
    roles.browser = new RoleProcess('browser-worker', 'apps/browser-worker/main.ts', browser, {
      ...env,
      BROWSER_WORKER_PORT: String(browser),
    });
    const sweeper = await port();
    roles.sweeper = new RoleProcess('sweeper', 'apps/sweeper/main.ts', sweeper, {
      ...env,
      SWEEPER_PORT: String(sweeper),
    });
    const keyWriter = await connectRedis(redis.url, 'producer', 'freeze-api-key');
    apiKey = (
      await new RunStore(keyWriter, `${prefix}:`).createApiKey({
        tenant: TENANT,
        principal: 'owner',
        scopes: ['admin', 'runs:write', 'runs:read', 'approvals:write'],
      })
    ).key;
    await closeRedis(keyWriter);
    await Promise.all(Object.values(roles).map((role) => role.ready(150_000)));
  }, 200_000);

  afterAll(async () => {
    redis?.thaw();
    await Promise.all(Object.values(roles).map((role) => role.stop('SIGTERM', 8_000)));
    for (const role of Object.values(roles))
      writeFileSync(join(dumpDir, `${role.name}-${role.child.pid}.log`), role.output());
    await site?.close();
    await redis?.stop();
    for (const folder of [dir, artifactsDir, opsDir])
      if (folder) rmSync(folder, { recursive: true, force: true });
    if (failed) console.log(`role logs kept in ${dumpDir}`);
    else rmSync(dumpDir, { recursive: true, force: true });
  }, 60_000);

  let agentId = '';

  /**
   * RUNS runs of ACTS acts each (`tag` names their pages), Redis frozen for `freezeMs` once every
   * run has paid once, then thawed: what each role and run did, for the cases to judge.
   */
  async function freezeMidScript(tag: string, freezeMs: number) {
    if (!agentId) {
      const agent = await call('POST', '/v1/agents', {
        model: 'scripted',
        instructions: 'Pay once per page.',
        tools: ['browser.navigate', 'browser.observe', 'browser.act'],
      });
      expect(agent.status).toBe(201);
      agentId = agent.body.id;
    }
    const page = (r: number, a: number) => `${tag}r${r}a${a}`;
    const runs: Array<{ token: string; runId: string }> = [];
    for (let r = 0; r < RUNS; r += 1) {
      const profile = await call('POST', '/v1/profiles', {
        id: `${tag}-shop-${r}`,
        allowed_origins: [site.origin],
      });
      expect(profile.status).toBe(201);
      const session = await call('POST', '/v1/sessions', {
        agent_id: agentId,
        browser_profile_id: `${tag}-shop-${r}`,
      });
      expect(session.status).toBe(201);
      const steps = Array.from({ length: ACTS }, (_, a) =>
        payOnceSteps(`${site.origin}/run/${page(r, a)}`),
      ).flat();
      const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
        input: `Pay run ${r}`,
        script: { steps, answer: 'Paid.' },
      });
      expect(run.status).toBe(201);
      runs.push({ token: `${tag}r${r}`, runId: run.body.id });
    }
    const linesBefore = Object.fromEntries(
      Object.values(roles).map((role) => [role.name, linkLines(role).length]),
    );
    const approvals = approver();

    // Mid-script: every run has paid at least once.
    const paymentsPerAct = () =>
      Array.from({ length: RUNS }, (_, r) =>
        Array.from({ length: ACTS }, (_, a) => site.payments.get(page(r, a)) ?? 0),
      );
    const deadline = Date.now() + 120_000;
    while (paymentsPerAct().some((acts) => acts.every((count) => count === 0)) && Date.now() < deadline)
      await sleep(100);
    const paidAtFreeze = paymentsPerAct().map((acts) => acts.reduce((x, y) => x + y, 0));

    redis.freeze();
    const frozenAtMs = Date.now();
    const firstUnready: Record<string, number | null> = {};
    const watchReadiness = Promise.all(
      Object.values(roles).map(async (role) => {
        firstUnready[role.name] = null;
        while (Date.now() - frozenAtMs < freezeMs - 500) {
          if ((await role.readyStatus()) === 503) {
            firstUnready[role.name] = Date.now() - frozenAtMs;
            return;
          }
          await sleep(100);
        }
      }),
    );
    // A request made once the freeze is a second old: answered 503, not held until Redis is back.
    await sleep(1_000);
    const during = await call('GET', '/v1/runs?limit=10', undefined, freezeMs);
    await watchReadiness;
    const onceSeen = await call('GET', '/v1/runs?limit=10', undefined, freezeMs);
    await sleep(Math.max(0, freezeMs - (Date.now() - frozenAtMs)));
    redis.thaw();

    const views = new Map<string, { status: string; error?: { code?: string; message?: string } | null }>();
    const endBy = Date.now() + 180_000;
    while (Date.now() < endBy) {
      for (const run of runs) {
        const view = await call('GET', `/v1/runs/${run.runId}`);
        if (view.status === 200) views.set(run.runId, view.body);
      }
      if (runs.every((run) => ENDED.has(views.get(run.runId)?.status ?? ''))) break;
      await sleep(500);
    }
    await approvals.stop();
    // Every role is ready again before the lines are read.
    await Promise.all(Object.values(roles).map((role) => role.ready(30_000)));

    const figures = {
      freeze_ms: freezeMs,
      paid_at_freeze: paidAtFreeze,
      first_503_ms: firstUnready,
      api_during: { status: during.status, ms: during.ms, code: during.body?.error?.code },
      api_once_seen: { status: onceSeen.status, ms: onceSeen.ms },
      runs: runs.map((run) => {
        const view = views.get(run.runId);
        return `${run.token} ${view?.status ?? 'missing'} ${view?.error?.code ?? ''}`.trim();
      }),
      payments: paymentsPerAct(),
    };
    console.log(JSON.stringify({ redis_freeze: figures }));
    const linkChanges = Object.fromEntries(
      Object.values(roles).map((role) => [role.name, linkLines(role).slice(linesBefore[role.name])]),
    );
    return { runs, figures, firstUnready, during, onceSeen, linkChanges };
  }

  /** The outage is told, once per role, within the bound; the API refuses at once; no act pays twice. */
  function expectOutageTold(seen: Awaited<ReturnType<typeof freezeMidScript>>) {
    expect({
      noticed_in_bound: Object.fromEntries(
        Object.entries(seen.firstUnready).map(([name, ms]) => [name, ms !== null && ms <= NOTICE_BOUND_MS]),
      ),
      api_refused_in_bound: seen.during.status === 503 && seen.during.ms <= NOTICE_BOUND_MS,
      api_refused_at_once: seen.onceSeen.status,
      link_lines: seen.linkChanges,
      paid_twice: seen.figures.payments.flat().filter((count) => count > 1).length,
    }).toEqual({
      noticed_in_bound: Object.fromEntries(Object.values(roles).map((role) => [role.name, true])),
      api_refused_in_bound: true,
      api_refused_at_once: 503,
      link_lines: Object.fromEntries(Object.values(roles).map((role) => [role.name, ['down', 'up']])),
      paid_twice: 0,
    });
  }

  function expectEveryRunPaidOncePerAct(seen: Awaited<ReturnType<typeof freezeMidScript>>) {
    expect({ runs: seen.figures.runs, payments: seen.figures.payments }).toEqual({
      runs: seen.runs.map((run) => `${run.token} succeeded`),
      payments: Array.from({ length: RUNS }, () => Array.from({ length: ACTS }, () => 1)),
    });
  }

  it('a freeze inside the job lock (5 s against 10 s): told within 3 s on every role, and every run succeeds with one payment per act', async () => {
    failed = true;
    const seen = await freezeMidScript('short', SHORT_FREEZE_MS);
    expectOutageTold(seen);
    // Each worker still holds its runs' locks once Redis answers: it goes on with a call in flight,
    // and hands back a run it held before a call.
    expectEveryRunPaidOncePerAct(seen);
    failed = false;
  });

  it('a freeze past the job lock (15 s against 10 s): told within 3 s on every role, and every run succeeds with one payment per act', async () => {
    failed = true;
    const seen = await freezeMidScript('long', FREEZE_MS);
    expectOutageTold(seen);
    // A call in flight at the freeze outlives its job lock: its worker drops the run without
    // writing, and the next owner learns the call's answer from the lease (the hand-over of a call
    // in flight, docs/architecture.md section 8).
    expectEveryRunPaidOncePerAct(seen);
    failed = false;
  });
});
