import { createServer, type Server } from 'node:http';
import { type AddressInfo, createServer as createTcpServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserWorkerHandle, startBrowserWorker } from '../../apps/browser-worker/service.js';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { BrowserWorkerAway } from '../../libs/provider/index.js';
import { MAX_FAULT_HANDBACKS, settleEscapedError } from '../../libs/run-worker/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { TEST_RUN_LIMITS } from '../fixtures/run-store.js';

async function freePort(): Promise<number> {
  const server = createTcpServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Outages pause: a browser worker restart takes 5–7 s, far past the acquisition retry
 * (ADR-0177, about 1.2 s). A run claimed while its profile's browser worker is gone is handed
 * back `queued`, showing `waiting_for: "browser_worker"`, and succeeds once the worker is back —
 * on a real fleet, a real Chromium and a page server that counts its visits.
 */
describe('a browser worker restart during a queued run', { timeout: 90_000 }, () => {
  let fleet: FleetHandle;
  let restarted: BrowserWorkerHandle | undefined;
  let site: Server;
  let origin: string;
  let visits = 0;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((request, response) => {
      // The page's own loads; its favicon, which Chromium asks for too, is no visit.
      if (request.url === '/ledger') visits += 1;
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Ledger</title><h1>Ledger</h1>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    // A fixed port, so the restarted worker answers where the old one did, as a pinned worker does.
    fleet = await startTestFleet(uniquePrefix('bw-restart'), {
      BROWSER_WORKER_PORT: String(await freePort()),
    });
  });

  afterAll(async () => {
    // The fleet first: its run worker may still be closing the run's lease on the restarted
    // worker, which must be there to answer (CI once saw this hook pass its minute the other way).
    await fleet?.close();
    await restarted?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  it('leaves the run queued waiting for the browser worker, then it succeeds on its page', async () => {
    const sessionId = await boundSession({ profileId: 'ledger', origin, instructions: 'Read the ledger.' });

    // The restart begins: the worker stops (and leaves the registry) before the run is claimed.
    await (fleet.roles.browserWorker as BrowserWorkerHandle).close();
    const stoppedAt = Date.now();
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Read the ledger',
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/ledger` }], answer: 'read' },
    });
    expect(submitted.status).toBe(201);
    const runId: string = submitted.body.id;

    let waiting: { status?: string; waiting_for?: string } | undefined;
    while (Date.now() - stoppedAt < 5_000) {
      const view = await call('GET', `/v1/runs/${runId}`);
      if (view.body.status === 'failed') break;
      if (view.body.waiting_for === 'browser_worker') {
        waiting = view.body;
        break;
      }
      await sleep(50);
    }
    const beforeRestart = await call('GET', `/v1/runs/${runId}`);
    // The worker stays away 6 s from its stop, as long as a real restart takes (5 to 7 s).
    await sleep(Math.max(0, stoppedAt + 6_000 - Date.now()));
    restarted = await startBrowserWorker({
      config: fleet.config,
      logger: silentLogger(),
      metrics: createMetrics({ role: 'browser-worker' }),
      redisUrl: testRedisUrl(),
    });

    expect(waiting).toMatchObject({ status: 'queued', waiting_for: 'browser_worker' });
    expect(beforeRestart.body).toMatchObject({ status: 'queued', error: null });
    const end = await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 60_000);
    expect({ status: end.status, error: end.error, waiting_for: end.waiting_for }).toEqual({
      status: 'succeeded',
      error: null,
      waiting_for: null,
    });
    expect(visits).toBe(1);
  });

  it('fails the run provider_unavailable at its step, not internal_error, when its browser worker has not come back after the last hand-back', async () => {
    const session = await call('POST', '/v1/sessions', {
      agent_id: (await call('POST', '/v1/agents', { model: 'scripted', instructions: 'wait' })).body.id,
    });
    // A run no worker sees (never enqueued): the bound without the backoff's half minute.
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
    const deps = { store: fleet.store, lifecycle, logger: silentLogger() };
    const outcomes: string[] = [];
    const waitingFor: unknown[] = [];
    for (let execution = 0; execution <= MAX_FAULT_HANDBACKS; execution += 1) {
      const claim = await fleet.store.claimRun(run.id, 1, `owner-${execution}`);
      if (!claim.ok) throw new Error(`claim ${execution} refused`);
      // The run's second model turn asked for the tool call that meets the absent worker.
      if (execution === 0)
        expect(
          (await fleet.store.addUsage(run.id, `owner-${execution}`, { steps: 2, model_calls: 2 })).ok,
        ).toBe(true);
      const settled = await settleEscapedError(deps, claim.run, `owner-${execution}`, away);
      outcomes.push(settled.kind === 'failed' ? `failed:${settled.code}` : settled.kind);
      waitingFor.push((await call('GET', `/v1/runs/${run.id}`)).body.waiting_for);
    }

    expect(outcomes).toEqual([
      ...Array(MAX_FAULT_HANDBACKS).fill('handed_back'),
      'failed:provider_unavailable',
    ]);
    expect(waitingFor).toEqual([...Array(MAX_FAULT_HANDBACKS).fill('browser_worker'), null]);
    const ended = await call('GET', `/v1/runs/${run.id}`);
    // Its step is the run's step index, as the loop's own ends carry it.
    expect(ended.body).toMatchObject({ status: 'failed', error: { code: 'provider_unavailable', step: 2 } });
  });
});
