import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { type EntryProcess, startEntryProcess } from '../fixtures/entry-process.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { payPage } from '../fixtures/pay-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** The slow navigate of the issue: a page that answers after 12 s. */
const SLOW_PAGE_MS = 12_000;
/** How long the pay button's request waits for its answer: the act answers after its postcondition's wait. */
const SLOW_PAY_MS = 9_000;

/**
 * A site that counts its effects: `GET /slow/<token>` answers after {@link SLOW_PAGE_MS};
 * `GET /shop/<token>` is the pay page, whose button's `POST /pay/<token>` is counted on arrival and
 * answered after {@link SLOW_PAY_MS}.
 */
function startSlowSite() {
  const loads = new Map<string, number>();
  const payments = new Map<string, number>();
  const count = (counts: Map<string, number>, token: string) =>
    counts.set(token, (counts.get(token) ?? 0) + 1);
  const server: Server = createServer((request, response) => {
    const path = request.url ?? '/';
    const html = (body: string) => {
      response.setHeader('content-type', 'text/html');
      response.setHeader('cache-control', 'no-store');
      response.end(body);
    };
    const slow = /^\/slow\/([\w-]+)$/.exec(path)?.[1];
    const shop = /^\/shop\/([\w-]+)$/.exec(path)?.[1];
    const pay = /^\/pay\/([\w-]+)$/.exec(path)?.[1];
    if (slow) {
      count(loads, slow);
      setTimeout(() => html('<!doctype html><title>Slow</title><h1>Slow page</h1>'), SLOW_PAGE_MS);
    } else if (shop) html(payPage(shop));
    else if (pay && request.method === 'POST') {
      count(payments, pay);
      setTimeout(() => response.end('ok'), SLOW_PAY_MS);
    } else response.writeHead(404).end();
  });
  return new Promise<{ server: Server; origin: string; loads: typeof loads; payments: typeof payments }>(
    (resolve) =>
      server.listen(0, '127.0.0.1', () =>
        resolve({
          server,
          origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
          loads,
          payments,
        }),
      ),
  );
}

async function waitFor(check: () => Promise<boolean> | boolean, timeoutMs: number, what: string) {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`no ${what} within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe('a stop finishes what it started', () => {
  let fleet: FleetHandle;
  let site: Awaited<ReturnType<typeof startSlowSite>>;
  let redis: Redis;
  const prefix = uniquePrefix('inflight');
  const token = randomBytes(32).toString('base64url');
  const sealKey = randomBytes(32).toString('base64');
  const workers: EntryProcess[] = [];
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  /** A run worker process; `shutdownMs` unset keeps the default bound (SHUTDOWN_TIMEOUT_MS). */
  const startRunWorker = (shutdownMs?: number): EntryProcess => {
    const worker = startEntryProcess('apps/run-worker/main.ts', {
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      RUN_WORKER_PORT: '0',
      LEASEHOLD_DATA_PLANE_TOKEN: token,
      LEASEHOLD_SEAL_KEY: sealKey,
      LOG_LEVEL: 'info',
      ...(shutdownMs === undefined ? {} : { SHUTDOWN_TIMEOUT_MS: String(shutdownMs) }),
    });
    workers.push(worker);
    return worker;
  };

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

  async function submit(profile: string, steps: unknown[]): Promise<string> {
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Do as the script says.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    expect((await call('POST', '/v1/profiles', { id: profile, allowed_origins: [site.origin] })).status).toBe(
      201,
    );
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profile,
    });
    const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: profile,
      timeout_ms: 3_600_000,
      script: { steps, answer: 'Done.' },
    });
    expect(submitted.status).toBe(201);
    return submitted.body.id;
  }

  async function toolSteps(runId: string) {
    const steps = await call('GET', `/v1/runs/${runId}/steps`);
    // biome-ignore lint/suspicious/noExplicitAny: the steps page, read field by field.
    return (steps.body.steps as any[]).filter((step) => step.kind === 'tool');
  }

  it('SIGTERM during a 12 s navigate: the navigate answers, the run is handed back and succeeds elsewhere, one load at the site', async () => {
    const runId = await submit('navigate', [
      { tool: 'browser.navigate', url: `${site.origin}/slow/nav` },
      { tool: 'browser.observe' },
    ]);
    // The default stop bound (SHUTDOWN_TIMEOUT_MS) holds a 12 s page.
    const first = startRunWorker();
    await waitFor(() => site.loads.get('nav') === 1, 60_000, 'slow page requested');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/handed back at shutdown/);
    // Its answer recorded before the hand-back: no call is left open for the next owner.
    const [navigate] = await toolSteps(runId);
    expect(navigate.status).toBe('ended');
    expect(navigate.tool.outcome).toMatchObject({ ok: true });
    expect((await call('GET', `/v1/runs/${runId}`)).body.status).toBe('queued');

    const second = startRunWorker();
    const done = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 60_000);
    expect(done.status).toBe('succeeded');
    expect(site.loads.get('nav')).toBe(1);
    const events = await fleet.store.readEvents(runId);
    expect(events.filter((event) => event.type === 'run.requeued')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'run.claimed')).toHaveLength(2);
    expect((await toolSteps(runId)).map((step) => step.tool.outcome?.code ?? null)).toEqual([null, null]);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  }, 150_000);

  it('SIGTERM during an act whose answer outlasts the stop bound: the next owner learns from the lease that it applied and goes on; one payment, never a second', async () => {
    const runId = await submit('act', [
      { tool: 'browser.navigate', url: `${site.origin}/shop/act` },
      {
        tool: 'browser.act',
        target: { role: 'button', name: 'Pay' },
        action: 'click',
        // Answered only when the payment's answer arrives: after the stop's bound.
        postcondition: { role: 'heading', name: 'Paid', wait_ms: 5_000 },
      },
      { tool: 'browser.observe' },
    ]);
    // 3 s: the drain (1.5 s) ends while the act waits for its answer.
    const first = startRunWorker(3_000);
    const parked = await waitForStatus(runId, ['parked', 'failed'], 60_000);
    expect(parked.status).toBe('parked');
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(approved.status).toBe(200);
    await waitFor(() => site.payments.get('act') === 1, 60_000, 'payment sent');
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/handed back at shutdown/);
    expect(site.payments.get('act')).toBe(1);

    const second = startRunWorker();
    const done = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 60_000);
    expect(done.status, JSON.stringify(done.error)).toBe('succeeded');
    expect(site.payments.get('act')).toBe(1);
    const act = (await toolSteps(runId)).find((step) => step.tool?.name === 'browser.act');
    expect(act?.tool.outcome).toEqual({ ok: true, code: null, message: 'completed during hand-over' });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
    // Still one: the act was never sent again.
    expect(site.payments.get('act')).toBe(1);
  }, 150_000);
});
