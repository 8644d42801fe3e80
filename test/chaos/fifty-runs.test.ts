import { randomBytes } from 'node:crypto';
import { appendFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isRunErrorCode } from '../../libs/contracts/index.js';
import { RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { type PaySite, payOnceSteps, startPaySite } from '../fixtures/pay-site.js';
import { freePort, OwnRedis } from './own-redis.js';
import { callApi, RoleProcess } from './role-processes.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
/** Diagnosis: LH_CHAOS_DUMP=<dir> keeps a progress log, every run's view and events and every role's log. */
const DUMP_DIR = process.env.LH_CHAOS_DUMP;
function progress(line: string): void {
  if (!DUMP_DIR) return;
  mkdirSync(DUMP_DIR, { recursive: true });
  appendFileSync(join(DUMP_DIR, 'progress.log'), `${new Date().toISOString()} ${line}\n`);
}

const PROFILES = 10;
const WAVES = 5;
/** Wave k of runs (one per profile) is submitted k × WAVE_MS after the first. */
const WAVE_MS = 8_000;
const ENDED = new Set(['succeeded', 'failed', 'cancelled']);
/** Shrunk timings (libs/config/env.ts): every mechanism that ends a fault acts within seconds. */
const TIMINGS = {
  RUN_LOCK_DURATION_MS: '3000',
  RUN_STALLED_INTERVAL_MS: '1500',
  SWEEP_INTERVAL_MS: '1000',
  LEASE_UPKEEP_INTERVAL_MS: '1000',
  LEASE_EXPIRY_SWEEP_INTERVAL_MS: '1000',
  BROWSER_WORKER_HEARTBEAT_MS: '1000',
  SHUTDOWN_TIMEOUT_MS: '6000',
};
/** After the last fault ends: the runs handed back with backoff (1+2+4+8+16 s) and a few sweeps. */
const SETTLE_BOUND_MS = 60_000;
/** The test's own bound on its settle waits, so it reports (and dumps) before vitest's timeout. */
const TEST_BUDGET_MS = 290_000;

interface Submitted {
  token: string;
  profile: number;
  sessionId: string;
  runId?: string;
  submitError?: string;
}

/**
 * 50 browser runs over 10 profiles while the fleet is hurt — run workers
 * SIGKILLed and SIGTERMed in turn, the browser worker SIGKILLed and restarted on the same id and
 * port, Redis stopped for 10 s and started again on its AOF, then frozen for 12 s, and then both run workers SIGTERMed
 * while pages load slowly. Every role is a real process on a
 * Redis of the test's own; the site's server counts each run's effect.
 */
describe('fifty browser runs while the fleet is hurt', { timeout: 330_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-fifty-'));
  const prefix = 'chaos50';
  let redis: OwnRedis;
  let site: PaySite;
  let apiKey = '';
  let env: Record<string, string>;
  const roles: Record<string, RoleProcess> = {};
  const retired: RoleProcess[] = [];

  function call(method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
    return callApi(roles.api?.port, apiKey, method, path, body, headers);
  }

  /**
   * Submits a run's script (navigate to `url`, then pay), sending it again under the same
   * Idempotency-Key while the API answers an outage (the fleet may be just out of one): a refusal
   * (4xx) or 45 s of outage is kept on the run as its submit error.
   */
  async function submit(run: Submitted, url: string): Promise<void> {
    const giveUpAt = Date.now() + 45_000;
    for (;;) {
      const answer = await call(
        'POST',
        `/v1/sessions/${run.sessionId}/runs`,
        {
          input: 'Pay once',
          script: { steps: payOnceSteps(url), answer: 'Paid.' },
        },
        { 'idempotency-key': `submit-${run.token}` },
      );
      if (answer.status === 201 || answer.status === 200) {
        run.runId = answer.body.id;
        return;
      }
      if (Date.now() > giveUpAt || (answer.status >= 400 && answer.status < 500)) {
        run.submitError = `${answer.status} ${JSON.stringify(answer.body).slice(0, 200)}`;
        return;
      }
      await sleep(500);
    }
  }

  /** The live leases held for this test's runs that `statusOf` says have ended. */
  async function leasesOnEndedRuns(statusOf: (runId: string) => string | undefined) {
    const reader = await connectRedis(redis.url, 'producer', 'chaos-lease-read');
    try {
      return (await new RedisLeaseStore(reader, `${prefix}:`).listLiveLeases()).filter((lease) =>
        ENDED.has(statusOf(lease.scope.run_id) ?? ''),
      );
    } finally {
      await closeRedis(reader);
    }
  }

  /** A run's event stream as text, read for at most 1.5 s (an ended run's stream may stay open). */
  async function eventText(runId: string): Promise<string> {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), 1_500);
    let text = '';
    try {
      const response = await fetch(`http://127.0.0.1:${roles.api?.port}/v1/runs/${runId}/events`, {
        headers: { authorization: `Bearer ${apiKey}` },
        signal: controller.signal,
      });
      const reader = response.body?.getReader();
      const decoder = new TextDecoder();
      for (;;) {
        const chunk = await reader?.read();
        if (!chunk || chunk.done) break;
        text += decoder.decode(chunk.value);
      }
    } catch {
      // the stream was cut at the bound: what came so far is the reading
    } finally {
      clearTimeout(timer);
    }
    return text;
  }

  beforeAll(async () => {
    redis = new OwnRedis(await freePort(), dir);
    await redis.start();
    site = await startPaySite();
    env = {
      REDIS_URL: redis.url,
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: randomBytes(32).toString('base64url'),
      LEASEHOLD_SEAL_KEY: randomBytes(32).toString('base64'),
      ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      LOG_LEVEL: 'info',
      LOG_PRETTY: 'false',
      API_RATE_PER_SECOND: '100000',
      API_RATE_BURST: '100000',
      ...TIMINGS,
    };
    const [api, sweeper, workerA, workerB, browser] = await Promise.all(
      Array.from({ length: 5 }, () => freePort()),
    );
    roles.api = new RoleProcess('api', 'apps/api/main.ts', api as number, { ...env, PORT: String(api) });
    roles.sweeper = new RoleProcess('sweeper', 'apps/sweeper/main.ts', sweeper as number, {
      ...env,
      SWEEPER_PORT: String(sweeper),
    });
    roles.browser = new RoleProcess('browser-worker', 'apps/browser-worker/main.ts', browser as number, {
      ...env,
      BROWSER_WORKER_PORT: String(browser),
      BROWSER_WORKER_ID: 'chaos-browser',
      BROWSER_WORKER_PROFILES: '*',
    });
    roles.workerA = new RoleProcess('run-worker-a', 'apps/run-worker/main.ts', workerA as number, {
      ...env,
      RUN_WORKER_PORT: String(workerA),
    });
    roles.workerB = new RoleProcess('run-worker-b', 'apps/run-worker/main.ts', workerB as number, {
      ...env,
      RUN_WORKER_PORT: String(workerB),
    });
    // The tenant's first key, straight into the store as `npm run api-key` makes it (README: API keys).
    const keyWriter = await connectRedis(redis.url, 'producer', 'chaos-api-key');
    apiKey = (
      await new RunStore(keyWriter, `${prefix}:`).createApiKey({
        tenant: 'chaos',
        principal: 'chaos',
        scopes: ['admin', 'runs:write', 'runs:read', 'approvals:write'],
      })
    ).key;
    await closeRedis(keyWriter);
    progress('roles started');
    await Promise.all(Object.values(roles).map((role) => role.ready(140_000)));
    progress('roles ready');
  }, 150_000);

  afterAll(async () => {
    await Promise.all([...Object.values(roles), ...retired].map((role) => role.stop('SIGKILL')));
    await redis?.stop();
    await site?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('loses, strands and repeats nothing, leaves no lease on an ended run, and names every failure', async () => {
    const testStartedAtMs = Date.now();
    // Set-up: 10 profiles, a scripted agent, a session per run (bound to its profile).
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Pay once.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    expect(agent.status).toBe(201);
    for (let p = 0; p < PROFILES; p += 1)
      expect(
        (await call('POST', '/v1/profiles', { id: `shop-${p}`, allowed_origins: [site.origin] })).status,
      ).toBe(201);
    const runs: Submitted[] = [];
    for (let k = 0; k < WAVES; k += 1)
      for (let p = 0; p < PROFILES; p += 1) {
        const session = await call('POST', '/v1/sessions', {
          agent_id: agent.body.id,
          browser_profile_id: `shop-${p}`,
        });
        expect(session.status).toBe(201);
        runs.push({ token: `r${k}p${p}`, profile: p, sessionId: session.body.id });
      }

    const statuses = new Map<string, { status: string; error?: { code?: string } | null }>();
    let stopped = false;

    // The approver: every act parks on its approval; the owner approves whatever is pending.
    const approver = (async () => {
      while (!stopped) {
        const pending = await call('GET', '/v1/approvals');
        for (const approval of pending.body?.approvals ?? [])
          await call('POST', `/v1/approvals/${approval.id}/approve`, {});
        await sleep(250);
      }
    })();
    // The watcher: each submitted run's status, read through the API.
    const watcher = (async () => {
      while (!stopped) {
        for (const run of runs) {
          if (!run.runId || ENDED.has(statuses.get(run.runId)?.status ?? '')) continue;
          const view = await call('GET', `/v1/runs/${run.runId}`);
          if (view.status === 200) statuses.set(run.runId, view.body);
        }
        await sleep(500);
      }
    })();

    // Submission: wave k at k × WAVE_MS, each run after the previous one on its profile has ended
    // (at most 20 s later), so the test does not depend on runs waiting their turn for a profile.
    // A submission refused by an outage is sent again under the same Idempotency-Key.
    const startedAtMs = Date.now();
    progress('sessions made; submitting');
    const submitter = Promise.all(
      Array.from({ length: PROFILES }, async (_, p) => {
        let previous: Submitted | undefined;
        for (let k = 0; k < WAVES; k += 1) {
          const run = runs[k * PROFILES + p] as Submitted;
          await sleep(Math.max(0, startedAtMs + k * WAVE_MS - Date.now()));
          const waitUntil = Date.now() + 20_000;
          while (
            previous?.runId &&
            !ENDED.has(statuses.get(previous.runId)?.status ?? '') &&
            Date.now() < waitUntil
          )
            await sleep(250);
          await submit(run, `${site.origin}/run/${run.token}`);
          previous = run;
        }
      }),
    );

    // Faults, in turn, while runs are in flight.
    const faults: string[] = [];
    const at = (ms: number) => sleep(Math.max(0, startedAtMs + ms - Date.now()));
    await at(5_000);
    const workerA = roles.workerA as RoleProcess;
    await workerA.stop('SIGKILL');
    retired.push(workerA);
    roles.workerA = workerA.restart('run-worker-a2', {
      port: await freePort(),
      portVariable: 'RUN_WORKER_PORT',
    });
    // Faults come in turn: the next waits for the fleet to be whole again (a run worker started
    // while Redis is away exits at start-up, and nothing here plays the supervisor that restarts it).
    await roles.workerA.ready();
    faults.push('run worker A SIGKILLed, a new one started');
    progress('run worker A SIGKILLed, a new one started');
    await at(14_000);
    const workerB = roles.workerB as RoleProcess;
    const drained = workerB.stop('SIGTERM');
    roles.workerB = workerB.restart('run-worker-b2', {
      port: await freePort(),
      portVariable: 'RUN_WORKER_PORT',
    });
    retired.push(workerB);
    await drained;
    await roles.workerB.ready();
    faults.push('run worker B SIGTERMed, a new one started');
    progress('run worker B SIGTERMed, a new one started');
    await at(23_000);
    const browser = roles.browser as RoleProcess;
    await browser.stop('SIGKILL');
    retired.push(browser);
    roles.browser = browser.restart();
    await roles.browser.ready();
    faults.push('browser worker SIGKILLed and restarted (same id and port)');
    progress('browser worker SIGKILLed and restarted (same id and port)');
    await at(33_000);
    await redis.stop();
    await sleep(10_000);
    await redis.start();
    faults.push('redis stopped for 10 s and started again (AOF)');
    // A freeze is an outage too: connections stay open and nothing answers (SIGSTOP), longer than
    // the job lock, so runs in flight are handed over with their leases.
    await sleep(3_000);
    redis.freeze();
    await sleep(12_000);
    redis.thaw();
    faults.push('redis frozen (SIGSTOP) for 12 s and thawed');
    progress('faults over');
    const faultsEndedAtMs = Date.now();

    await submitter;
    progress(`submitted: ${runs.filter((run) => run.runId).length}`);
    // Every run ends within the bound: the hand-back backoff and a few sweeps after the faults.
    const lastSubmittedAtS = Math.round((Date.now() - startedAtMs) / 1000);
    // The test reports before its own timeout whatever happens.
    const boundAtMs = Math.min(
      Math.max(faultsEndedAtMs, Date.now()) + SETTLE_BOUND_MS,
      testStartedAtMs + TEST_BUDGET_MS,
    );
    while (Date.now() < boundAtMs) {
      const open = runs.filter((run) => run.runId && !ENDED.has(statuses.get(run.runId)?.status ?? ''));
      if (open.length === 0) break;
      await sleep(500);
    }
    const allEndedAtS = Math.round((Date.now() - startedAtMs) / 1000);
    progress(`settled at ${allEndedAtS} s`);

    // ---- A SIGTERM with slow pages: a graceful stop finishes what it started. ----
    // One more run per profile opens a page that answers after SLOW_PAGE_MS, longer than the
    // workers' drain (80% of SHUTDOWN_TIMEOUT_MS); both run workers are SIGTERMed while those
    // pages load. Navigates that answer inside the drain hand their runs back at the next call;
    // the others go to the next owner with their lease, which learns from it that they applied.
    // None may end outcome_unknown, lose, strand or repeat its payment.
    const slowRuns: Submitted[] = [];
    {
      // The fleet whole again first: the API may still be telling the thawed Redis's outage.
      await (roles.api as RoleProcess).ready();
      for (let p = 0; p < PROFILES; p += 1) {
        const session = await call('POST', '/v1/sessions', {
          agent_id: agent.body.id,
          browser_profile_id: `shop-${p}`,
        });
        const run: Submitted = { token: `slow${p}`, profile: p, sessionId: session.body.id };
        await submit(run, `${site.origin}/slow/run/${run.token}`);
        slowRuns.push(run);
        runs.push(run);
      }
      const loading = () => slowRuns.filter((run) => (site.pageLoads.get(run.token) ?? 0) > 0).length;
      const waitUntil = Date.now() + 30_000;
      while (loading() < PROFILES / 2 && Date.now() < waitUntil) await sleep(100);
      progress(`slow pages loading: ${loading()}`);
      const stopping = [roles.workerA, roles.workerB] as RoleProcess[];
      const exits = stopping.map((worker) => worker.stop('SIGTERM'));
      roles.workerA = (stopping[0] as RoleProcess).restart('run-worker-a3', {
        port: await freePort(),
        portVariable: 'RUN_WORKER_PORT',
      });
      roles.workerB = (stopping[1] as RoleProcess).restart('run-worker-b3', {
        port: await freePort(),
        portVariable: 'RUN_WORKER_PORT',
      });
      retired.push(...stopping);
      await Promise.all(exits);
      await Promise.all([roles.workerA.ready(), roles.workerB.ready()]);
      faults.push(`both run workers SIGTERMed while ${loading()} slow pages loaded, new ones started`);
      progress('slow-page SIGTERM over');
      const slowBoundAtMs = Math.min(Date.now() + SETTLE_BOUND_MS, testStartedAtMs + TEST_BUDGET_MS);
      while (
        Date.now() < slowBoundAtMs &&
        slowRuns.some((run) => run.runId && !ENDED.has(statuses.get(run.runId)?.status ?? ''))
      )
        await sleep(500);
      progress('slow runs settled');
    }
    // A run's end closes its lease; where the browser worker could not be told, an upkeep pass of
    // the run worker holding the lease does (or of the one the sweeper hands it to). At least three
    // upkeep passes and a sweep after the last end (a lease taken late would show by then), at most
    // ten passes and five sweeps, then the final reading.
    await sleep(3 * Number(TIMINGS.LEASE_UPKEEP_INTERVAL_MS) + Number(TIMINGS.SWEEP_INTERVAL_MS));
    const leaseBoundAtMs =
      Date.now() + 10 * Number(TIMINGS.LEASE_UPKEEP_INTERVAL_MS) + 5 * Number(TIMINGS.SWEEP_INTERVAL_MS);
    while (
      Date.now() < leaseBoundAtMs &&
      (await leasesOnEndedRuns((runId) => statuses.get(runId)?.status)).length > 0
    )
      await sleep(500);
    stopped = true;
    await Promise.all([approver, watcher]);

    const views = new Map<string, { status: number; body: { status?: string; error?: { code?: string } } }>();
    for (const run of runs) if (run.runId) views.set(run.runId, await call('GET', `/v1/runs/${run.runId}`));
    const unsubmitted = runs.filter((run) => !run.runId);
    const lost = runs.filter((run) => run.runId && views.get(run.runId)?.status === 404);
    const stranded = runs.filter(
      (run) =>
        run.runId &&
        views.get(run.runId)?.status === 200 &&
        !ENDED.has(views.get(run.runId)?.body.status ?? ''),
    );
    const repeated = runs.filter((run) => (site.payments.get(run.token) ?? 0) > 1);
    const succeededWithoutEffect = runs.filter(
      (run) =>
        run.runId &&
        views.get(run.runId)?.body.status === 'succeeded' &&
        (site.payments.get(run.token) ?? 0) !== 1,
    );
    const unended = runs.filter((run) => run.runId && views.get(run.runId)?.body.status !== 'succeeded');
    const codes: Record<string, number> = {};
    for (const run of unended) {
      const code = views.get(run.runId as string)?.body.error?.code ?? 'not_ended';
      codes[code] = (codes[code] ?? 0) + 1;
    }
    const namelessFailures = unended.filter((run) => {
      const view = views.get(run.runId as string)?.body;
      if (!view || !ENDED.has(view.status ?? '')) return false;
      const code = view.error?.code;
      return !code || !isRunErrorCode(code) || code === 'model_error';
    });

    const runIds = new Set(runs.flatMap((run) => (run.runId ? [run.runId] : [])));
    const leasesOnEnded = await leasesOnEndedRuns(
      (runId) => views.get(runId)?.body.status ?? statuses.get(runId)?.status,
    );

    // Of the runs in flight at the slow-page SIGTERM: none ended, nor had a call end, outcome_unknown.
    const unknownAfterGracefulStop: string[] = [];
    for (const run of slowRuns) {
      if (!run.runId) continue;
      const steps = await call('GET', `/v1/runs/${run.runId}/steps`);
      const codes = [
        views.get(run.runId)?.body.error?.code,
        ...(
          (steps.body?.steps ?? []) as Array<{ tool?: { outcome?: { code?: string | null } | null } | null }>
        ).map((step) => step.tool?.outcome?.code),
      ];
      if (codes.includes('outcome_unknown')) unknownAfterGracefulStop.push(run.token);
    }

    const counts = {
      runs: runs.length,
      submitted: runIds.size,
      succeeded: runs.filter((run) => run.runId && views.get(run.runId)?.body.status === 'succeeded').length,
      lost: lost.length + unsubmitted.length,
      stranded: stranded.length,
      repeated_effects: repeated.length,
      succeeded_without_effect: succeededWithoutEffect.length,
      leases_live_on_ended_runs: leasesOnEnded.length,
      nameless_failures: namelessFailures.length,
      outcome_unknown_after_graceful_stop: unknownAfterGracefulStop.length,
      slow_runs_succeeded: slowRuns.filter(
        (run) => run.runId && views.get(run.runId)?.body.status === 'succeeded',
      ).length,
      error_codes: codes,
      effects: [...site.payments.values()].reduce((sum, count) => sum + count, 0),
      faults,
      faults_ended_at_s: Math.round((faultsEndedAtMs - startedAtMs) / 1000),
      last_submitted_at_s: lastSubmittedAtS,
      all_ended_at_s: allEndedAtS,
      wall_s: Math.round((Date.now() - startedAtMs) / 1000),
    };
    console.log(JSON.stringify({ chaos_fifty_runs: counts }));
    const dumpDir = DUMP_DIR;
    if (dumpDir) {
      await Promise.all(
        runs.map(async (run) => {
          if (!run.runId) return;
          writeFileSync(
            join(dumpDir, `${run.token}.json`),
            JSON.stringify(
              {
                view: views.get(run.runId)?.body,
                payments: site.payments.get(run.token) ?? 0,
                events: await eventText(run.runId),
              },
              null,
              1,
            ),
          );
        }),
      );
      for (const role of [...Object.values(roles), ...retired])
        writeFileSync(join(dumpDir, `${role.name}-${role.child.pid}.log`), role.output());
    }
    if (stranded.length + lost.length + namelessFailures.length + leasesOnEnded.length > 0)
      console.log(
        JSON.stringify({
          stranded: stranded.map((run) => ({ token: run.token, view: views.get(run.runId as string)?.body })),
          nameless: namelessFailures.map((run) => ({
            token: run.token,
            view: views.get(run.runId as string)?.body,
          })),
          leases: leasesOnEnded.map((lease) => ({ run: lease.scope.run_id, profile: lease.profile.id })),
          unsubmitted: unsubmitted.map((run) => ({ token: run.token, error: run.submitError })),
        }),
      );

    expect({
      lost: counts.lost,
      stranded: counts.stranded,
      repeated_effects: counts.repeated_effects,
      succeeded_without_effect: counts.succeeded_without_effect,
      leases_live_on_ended_runs: counts.leases_live_on_ended_runs,
      nameless_failures: counts.nameless_failures,
      outcome_unknown_after_graceful_stop: counts.outcome_unknown_after_graceful_stop,
    }).toEqual({
      lost: 0,
      stranded: 0,
      repeated_effects: 0,
      succeeded_without_effect: 0,
      leases_live_on_ended_runs: 0,
      nameless_failures: 0,
      outcome_unknown_after_graceful_stop: 0,
    });
  });
});
