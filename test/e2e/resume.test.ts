import { type ChildProcess, spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { connectRedis } from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { roleCommand } from '../fixtures/role-command.js';

const root = fileURLToPath(new URL('../../', import.meta.url));

/**
 * Runs that outlive their worker: parked and resumed in another worker process, and a worker
 * killed with SIGKILL in the middle of a navigation. Real processes, real Chromium, real Redis.
 */
describe('a run survives its worker', { timeout: 120_000 }, () => {
  const prefix = uniquePrefix('resume');
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  const hits = new Map<string, number>();
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      hits.set(path, (hits.get(path) ?? 0) + 1);
      const page = `<!doctype html><title>Shop</title><button onclick="fetch('/buy',{method:'POST'}).then(()=>document.body.insertAdjacentHTML('beforeend','<p>Thank you</p>'))">Buy</button>`;
      if (path === '/buy') return void response.end('ok');
      // The slow page answers after 4 s: long enough to kill the worker that asked for it.
      setTimeout(
        () => {
          response.setHeader('content-type', 'text/html');
          response.end(page);
        },
        path.startsWith('/slow') ? 4_000 : 0,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    // BullMQ throttles every worker's stall check on one queue key, held for the interval of the
    // worker that checked last: the fleet's default 30 s held off the worker processes' 1 s check
    // for as long, and a killed worker's run waited that out. The stall check reclaims only lapsed locks.
    fleet = await startTestFleet(prefix, { RUN_STALLED_INTERVAL_MS: '1000' });
    // Only worker processes of this test run runs from here on.
    await fleet.roles.runWorker.close();
  });

  // Each test starts the worker processes it needs; none outlives it.
  afterEach(async () => {
    await Promise.all(
      children.splice(0).map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGKILL');
        await exited;
      }),
    );
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  function startWorkerProcess(): ChildProcess {
    const child = spawn(process.execPath, roleCommand('apps/run-worker/main.ts'), {
      cwd: root,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: process.env.HOME ?? '/tmp',
        REDIS_URL: testRedisUrl(),
        LEASEHOLD_KEY_PREFIX: `${prefix}:`,
        QUEUE_PREFIX: prefix,
        LEASEHOLD_DATA_PLANE_TOKEN: fleet.config.secrets.dataPlaneToken ?? '',
        RUN_WORKER_PORT: '0',
        RUN_LOCK_DURATION_MS: '2000',
        RUN_STALLED_INTERVAL_MS: '1000',
        LOG_LEVEL: 'silent',
      },
      stdio: 'ignore',
    });
    children.push(child);
    return child;
  }

  async function call(method: string, path: string, body?: unknown) {
    const response = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${fleet.apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: response.status, body: await response.json() };
  }

  async function waitFor<T>(
    read: () => Promise<T>,
    done: (value: T) => boolean,
    what: string,
    timeoutMs = 45_000,
  ): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await read();
      if (done(value)) return value;
      if (Date.now() > deadline) throw new Error(`${what}: still ${JSON.stringify(value).slice(0, 300)}`);
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
  }

  async function submit(profileId: string, steps: unknown[]) {
    await call('POST', '/v1/profiles', { id: profileId, allowed_origins: [origin] });
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: profileId });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profileId,
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'buy',
      script: { steps, answer: 'Bought.' },
    });
    expect(run.status).toBe(201);
    return run.body.id as string;
  }

  const buy = { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' };
  const runStatus = (runId: string) => call('GET', `/v1/runs/${runId}`).then((answer) => answer.body);

  async function liveLease(profileId: string) {
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-lease-read');
    try {
      const leases = new RedisLeaseStore(redis, `${prefix}:`);
      const leaseId = await leases.liveLeaseId({ tenant: 'dev', id: profileId });
      return leaseId ? leases.getLease({ tenant: 'dev', id: profileId }, leaseId) : undefined;
    } finally {
      redis.disconnect();
    }
  }

  it('parks in one worker process and resumes in another on the same lease and action sequence', async () => {
    const first = startWorkerProcess();
    const runId = await submit('resume', [{ tool: 'browser.navigate', url: `${origin}/shop` }, buy]);
    const parked = await waitFor(
      () => runStatus(runId),
      (run) => run.status === 'parked',
      'park',
    );
    const leaseBefore = await liveLease('resume');
    expect(leaseBefore).toMatchObject({ sequence: 1, state: 'live' });

    first.kill('SIGTERM');
    await new Promise((resolve) => first.once('exit', resolve));
    startWorkerProcess();
    await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    const done = await waitFor(
      () => runStatus(runId),
      (run) => ['succeeded', 'failed'].includes(run.status),
      'finish',
    );
    expect(done).toMatchObject({ status: 'succeeded', attempt: 1 });
    expect(hits.get('/buy')).toBe(1);
    // The second process reattached to the first one's lease: same lease, the sequence went on to 2.
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-lease-read');
    const closed = await new RedisLeaseStore(redis, `${prefix}:`).getLease(
      { tenant: 'dev', id: 'resume' },
      leaseBefore?.id ?? '',
    );
    redis.disconnect();
    expect(closed).toMatchObject({ sequence: 2, effects: 2 });
  });

  it('resumes a run whose worker was killed mid-navigation, never sending the navigation again', async () => {
    const victim = startWorkerProcess();
    const runId = await submit('killed', [
      // The navigate has no answer when its worker dies; the next owner learns from the lease
      // what became of it (ADR-0127 d3, amended), so the script needs no `may_fail` here.
      { tool: 'browser.navigate', url: `${origin}/slow` },
      { tool: 'browser.observe' },
      buy,
    ]);
    await waitFor(
      async () => hits.get('/slow') ?? 0,
      (count) => count === 1,
      'the slow page requested',
    );
    victim.kill('SIGKILL');
    await new Promise((resolve) => victim.once('exit', resolve));

    startWorkerProcess();
    const parked = await waitFor(
      () => runStatus(runId),
      (run) => ['parked', 'failed', 'succeeded'].includes(run.status),
      'resume',
    );
    expect(parked.status).toBe('parked');
    await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    const done = await waitFor(
      () => runStatus(runId),
      (run) => ['succeeded', 'failed'].includes(run.status),
      'finish',
    );
    expect(done).toMatchObject({ status: 'succeeded', attempt: 1 });
    // The navigation was dispatched once, before the kill; the resumed run learned from the lease
    // that it applied, and its step says so.
    expect(hits.get('/slow')).toBe(1);
    const ledger = await fleet.store.listInvocations(runId);
    expect(ledger.find((entry) => entry.tool === 'browser.navigate')).toMatchObject({
      state: 'completed',
    });
    const steps = (await call('GET', `/v1/runs/${runId}/steps`)).body.steps as Array<{
      tool: { name: string; outcome: unknown } | null;
    }>;
    expect(steps.find((step) => step.tool?.name === 'browser.navigate')?.tool?.outcome).toEqual({
      ok: true,
      code: null,
      message: 'completed during hand-over',
    });
    expect(ledger.filter((entry) => entry.tool === 'browser.act')).toHaveLength(1);
  });

  it('cancels a queued run at once', async () => {
    const runId = await submit('cancel-queued', [{ tool: 'browser.navigate', url: `${origin}/q` }]);
    const cancelled = await call('POST', `/v1/runs/${runId}/cancel`);
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
  });

  it('cancels a parked run at once and releases its lease in the same request', async () => {
    startWorkerProcess();
    const runId = await submit('cancel-parked', [{ tool: 'browser.navigate', url: `${origin}/p` }, buy]);
    const parked = await waitFor(
      () => runStatus(runId),
      (run) => run.status === 'parked',
      'park',
    );
    expect(await liveLease('cancel-parked')).toMatchObject({ state: 'live' });
    const cancelled = await call('POST', `/v1/runs/${runId}/cancel`);
    expect(cancelled.body).toMatchObject({ status: 'cancelled' });
    expect(await liveLease('cancel-parked')).toBeUndefined();
    // The approval can no longer start anything.
    const late = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(late.status).toBeGreaterThanOrEqual(400);
    expect((await runStatus(runId)).status).toBe('cancelled');
  });

  it('stops a running run before its next call once cancelled, and closes its lease', async () => {
    startWorkerProcess();
    const runId = await submit('cancel-running', [
      { tool: 'browser.navigate', url: `${origin}/slow-cancel` },
      { tool: 'browser.navigate', url: `${origin}/never` },
    ]);
    await waitFor(
      () => runStatus(runId),
      (run) => run.status === 'running',
      'running',
    );
    await waitFor(
      async () => hits.get('/slow-cancel') ?? 0,
      (count) => count === 1,
      'the slow page requested',
    );
    const asked = await call('POST', `/v1/runs/${runId}/cancel`);
    expect(asked.body).toMatchObject({ status: 'running', cancel_requested: true });
    await waitFor(
      () => runStatus(runId),
      (run) => run.status === 'cancelled',
      'cancelled',
    );
    expect(hits.get('/never')).toBeUndefined();
    await waitFor(
      () => liveLease('cancel-running'),
      (lease) => lease === undefined,
      'lease closed',
      10_000,
    );
  });
});
