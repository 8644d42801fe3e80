import { createServer, request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileRef } from '../../libs/contracts/index.js';
import {
  acquireIdempotencyKey,
  type BrowserLeaseProvider,
  type BrowserWorkerLocation,
  executeBrowserTool,
} from '../../libs/provider/index.js';
import {
  dispatchCounter as counter,
  LeaseRig,
  rejection,
  rigProfile,
  toolCalls,
} from '../fixtures/lease-rig.js';
import { pressButton as button, freePort, PRESS_PAGE } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/** The run side of the data plane against a real browser worker (real Chromium, real Redis). */
describe('browser lease provider', () => {
  let rig: LeaseRig;
  let proxy: DroppingProxy;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('provider'),
      principal: 'owner',
      profileIds: 'prov',
      page: PRESS_PAGE,
    });
    proxy = await startDroppingProxy(rig.worker.url);
  });

  afterAll(async () => {
    await proxy?.close();
    await rig?.close();
  });

  function provider(
    profileId: string,
    runId: string,
    findWorker?: (profile: ProfileRef) => Promise<BrowserWorkerLocation | undefined>,
  ): BrowserLeaseProvider {
    // Every run here still needs its page (ADR-0127 d7: a newcomer is refused, never replaces it).
    return rig.provider(profileId, runId, findWorker ? { findWorker } : {});
  }

  /** A tool call's identity and limits, as the run loop would give them. */
  const call = toolCalls((n) => `run:step-${n}:0`, { timeoutMs: 20_000 });

  it('reattaches a second provider of the same run attempt to its live lease and continues its action sequence', async () => {
    const profileId = await rig.newProfile();
    const first = provider(profileId, 'run_resume');
    const firstHooks = counter();
    const navigated = await executeBrowserTool(
      first,
      'browser.navigate',
      { url: `${rig.origin}/one` },
      call(),
      firstHooks,
    );
    expect(firstHooks.calls).toBe(1);
    expect(navigated.observation.title).toBe('shop');
    expect(typeof navigated.evidenceKey).toBe('string');
    const leaseId = first.lease?.leaseId;
    expect(first.lease).toMatchObject({ profileId, workerId: 'bw-test', sequence: 1 });

    // Another process resumes the run: a new provider, the same scope, another invocation.
    const second = provider(profileId, 'run_resume');
    const reattached = await second.ensureLease(`run:resumed:${leaseId}`, Date.now() + 10 * 60_000);
    expect(reattached).toMatchObject({ leaseId, sequence: 1 });
    const secondHooks = counter();
    const acted = await executeBrowserTool(
      second,
      'browser.act',
      {
        revision: navigated.observation.revision,
        element: button(navigated.observation).ref,
        action: 'click',
      },
      call(),
      secondHooks,
    );
    expect(secondHooks.calls).toBe(1);
    expect(acted.observation.text).toContain('clicked');
    expect(second.lease).toMatchObject({ leaseId, sequence: 2 });
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId ?? '')).toMatchObject({
      sequence: 2,
      effects: 2,
    });

    // The first provider's sequence is now behind: a desynchronised lease is not trusted again.
    const stale = await rejection(
      executeBrowserTool(first, 'browser.navigate', { url: `${rig.origin}/behind` }, call(), firstHooks),
    );
    expect(stale).toMatchObject({ code: 'outcome_unknown', serviceCode: 'sequence_mismatch' });
    expect(rig.hits.get('/behind')).toBeUndefined();
    expect(first.lease).toBeUndefined();
    expect(first.retiredLease).toMatchObject({ leaseId });
  });

  it("refuses a different run the profile another run's lease holds: profile_unavailable", async () => {
    const profileId = await rig.newProfile();
    await provider(profileId, 'run_holder').ensureLease('holder:1:0', Date.now() + 600_000);
    const error = await rejection(
      provider(profileId, 'run_newcomer').ensureLease('newcomer:1:0', Date.now() + 600_000),
    );
    expect(error.code).toBe('profile_unavailable');
    expect(error.retryable).toBe(false);
    expect(error.facts).toMatchObject({ holder_run_id: 'run_holder' });
  });

  it('replays an acquire sent again for the same invocation: one lease, one browser context', async () => {
    const profileId = await rig.newProfile();
    const contextsBefore = rig.worker.handle.browser.contexts().length;
    const horizonMs = Date.now() + 600_000;
    const first = await provider(profileId, 'run_replay').ensureLease('replay:1:0', horizonMs);
    // The same request again, as a resumed worker or a retry would send it.
    const again = await provider(profileId, 'run_replay').ensureLease('replay:1:0', horizonMs);
    expect(again.leaseId).toBe(first.leaseId);
    const raw = await rig.admin.acquire(
      rigProfile(profileId),
      {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_replay',
        attempt: 1,
        requested_expires_at_ms: horizonMs,
      },
      acquireIdempotencyKey('replay:1:0'),
    );
    expect(raw.replayed).toBe(true);
    expect(raw.lease.lease_id).toBe(first.leaseId);
    expect(rig.worker.handle.browser.contexts().length).toBe(contextsBefore + 1);
  });

  it('keeps the code of a refusal given before dispatch and does not advance the sequence', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_refusals');
    const hooks = counter();
    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${rig.origin}/form` },
      call(),
      hooks,
    );
    const target = button(navigated.observation);

    const stale = await rejection(
      executeBrowserTool(
        run,
        'browser.act',
        { revision: 'stale', element: target.ref, action: 'click' },
        call(),
        hooks,
      ),
    );
    expect(stale.code).toBe('page_changed');
    const disallowed = await rejection(
      executeBrowserTool(run, 'browser.navigate', { url: 'http://elsewhere.invalid/' }, call(), hooks),
    );
    expect(disallowed.code).toBe('url_disallowed');
    expect(run.lease).toMatchObject({ sequence: 1 });

    const leaseId = run.lease?.leaseId ?? '';
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      sequence: 1,
      effects: 1,
    });
    await executeBrowserTool(
      run,
      'browser.act',
      { revision: navigated.observation.revision, element: target.ref, action: 'click' },
      call(),
      hooks,
    );
    expect(run.lease).toMatchObject({ leaseId, sequence: 2 });
  });

  it('refuses invalid tool arguments before anything is sent', async () => {
    const profileId = await rig.newProfile();
    let lookups = 0;
    const run = provider(profileId, 'run_invalid', (profile) => {
      lookups += 1;
      return rig.registry.findForProfile(profile);
    });
    const hooks = counter();
    const unsent = await rejection(executeBrowserTool(run, 'browser.navigate', { url: 42 }, call(), hooks));
    expect(unsent.code).toBe('invalid_arguments');
    expect(lookups).toBe(0);

    await executeBrowserTool(run, 'browser.navigate', { url: `${rig.origin}/args` }, call(), hooks);
    const leaseId = run.lease?.leaseId ?? '';
    const invalid = await rejection(
      executeBrowserTool(
        run,
        'browser.act',
        { revision: 'r1', element: 'e1', action: 'hover' },
        call(),
        hooks,
      ),
    );
    expect(invalid.code).toBe('invalid_arguments');
    expect(invalid.message).not.toContain('hover');
    expect(hooks.calls).toBe(1);
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      sequence: 1,
      effects: 1,
    });
    expect(run.lease).toMatchObject({ leaseId, sequence: 1 });
  });

  it('answers a browser worker that refuses connections as away (retryable provider_unavailable): the run waits for it', async () => {
    const closedPort = await freePort();
    const run = provider('prov-nowhere', 'run_refused', async () => ({
      id: 'bw-gone',
      url: `http://127.0.0.1:${closedPort}`,
    }));
    const hooks = counter();
    const error = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${rig.origin}/` },
      call(),
      hooks,
    ).then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toMatchObject({
      name: 'BrowserWorkerAway',
      code: 'provider_unavailable',
      retryable: true,
      waitingFor: 'browser_worker',
      cause: { transport: 'not_connected' },
    });
    expect(hooks.calls).toBe(0);
    expect(run.lease).toBeUndefined();
  });

  it('reports an act whose answer is lost as outcome_unknown, retires its lease and starts afresh', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_lost', async () => ({ id: 'bw-test', url: proxy.url }));
    const hooks = counter();
    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${rig.origin}/lost` },
      call(),
      hooks,
    );
    const leaseId = run.lease?.leaseId ?? '';

    proxy.dropAnswersTo = /\/act$/;
    const lost = await rejection(
      executeBrowserTool(
        run,
        'browser.act',
        {
          revision: navigated.observation.revision,
          element: button(navigated.observation).ref,
          action: 'click',
        },
        call(),
        hooks,
      ),
    );
    proxy.dropAnswersTo = undefined;
    expect(lost.code).toBe('outcome_unknown');
    expect(lost.retryable).toBe(false);
    expect(hooks.calls).toBe(2);
    // The service did act: the effect happened once, and the run side knows it cannot tell.
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      sequence: 2,
      effects: 2,
    });
    expect(run.lease).toBeUndefined();
    expect(run.retiredLease).toMatchObject({ leaseId });

    // ADR-0127 d3: the next call closes the retired lease unsealed and starts from a fresh page.
    const fresh = await run.ensureLease('lost:next:0', Date.now() + 600_000);
    expect(fresh.leaseId).not.toBe(leaseId);
    expect(fresh.sequence).toBe(0);
    expect(run.retiredLease).toBeUndefined();
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });
  });

  it('answers a read that outlives its deadline with a retryable provider_unavailable and drops the lease', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_slow', async () => ({ id: 'bw-test', url: proxy.url }));
    const held = await run.ensureLease('slow:1:0', Date.now() + 600_000);
    proxy.holdAnswersTo = /\/observe$/;
    const startedAt = Date.now();
    const late = await rejection(run.observe({}, { deadlineMs: Date.now() + 1_500 }));
    proxy.holdAnswersTo = undefined;
    expect(Date.now() - startedAt).toBeLessThan(5_000);
    expect(late).toMatchObject({ code: 'provider_unavailable', retryable: true, transport: 'timeout' });
    // ADR-0127 d2: a lease that stopped answering is not trusted again; the run's end closes it unsealed.
    expect(run.lease).toBeUndefined();
    expect(run.retiredLease).toMatchObject({ leaseId: held.leaseId });
    expect(await run.close({ seal: true })).toBeUndefined();
    expect(await rig.admin.getLease(rigProfile(profileId), held.leaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });
  });

  it("closes the lease at the run's end, sealing its state into the profile", async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_done');
    await executeBrowserTool(run, 'browser.navigate', { url: `${rig.origin}/done` }, call(), counter());
    const contextsBefore = rig.worker.handle.browser.contexts().length;
    const closed = await run.close({ seal: true });
    expect(closed).toMatchObject({ state: 'closed', sealed: true, close_reason: 'closed', sequence: 1 });
    expect(run.lease).toBeUndefined();
    expect(rig.worker.handle.browser.contexts().length).toBe(contextsBefore - 1);
    const profile = (await rig.admin.listProfiles('t1')).find((candidate) => candidate.id === profileId);
    expect(profile).toMatchObject({ sealed: true });
  });
});

interface DroppingProxy {
  url: string;
  /** Requests whose path matches reach the service, and their answer is dropped on the way back. */
  dropAnswersTo: RegExp | undefined;
  /** Requests whose path matches reach the service, and their answer is held back until the proxy closes. */
  holdAnswersTo: RegExp | undefined;
  close(): Promise<void>;
}

/** A tiny HTTP proxy in front of the browser worker that can lose an answer after the service acted. */
async function startDroppingProxy(target: string): Promise<DroppingProxy> {
  const upstream = new URL(target);
  const state: DroppingProxy = {
    url: '',
    dropAnswersTo: undefined,
    holdAnswersTo: undefined,
    close: async () => undefined,
  };
  const server = createServer((request, response) => {
    const drop = state.dropAnswersTo?.test(request.url ?? '') ?? false;
    const hold = state.holdAnswersTo?.test(request.url ?? '') ?? false;
    const forwarded = httpRequest(
      {
        host: upstream.hostname,
        port: upstream.port,
        method: request.method,
        path: request.url,
        headers: request.headers,
      },
      (answer) => {
        if (drop) {
          // Read the whole answer (the service has finished acting), then lose it.
          answer.resume();
          answer.on('end', () => request.socket.destroy());
          return;
        }
        if (hold) {
          answer.resume();
          return;
        }
        response.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(response);
      },
    );
    forwarded.on('error', () => request.socket.destroy());
    request.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return state;
}
