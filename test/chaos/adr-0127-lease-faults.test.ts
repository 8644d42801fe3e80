import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ProfileRef } from '../../libs/contracts/index.js';
import { runNeedsPage } from '../../libs/contracts/index.js';
import {
  type BrowserLeaseProvider,
  type BrowserWorkerLocation,
  DataPlaneClient,
  executeBrowserTool,
} from '../../libs/provider/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import {
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
  TestClock,
} from '../fixtures/browser-worker.js';
import {
  ACQUIRE_PATH as ACQUIRE,
  ACT_PATH as ACT,
  CLOSE_PATH as CLOSE,
  LeaseRig,
  leaseProvider,
  NAVIGATE_PATH as NAVIGATE,
  rejection,
  rigProfile,
  toolCalls,
} from '../fixtures/lease-rig.js';
import { freePort, type PressSite, pressButton, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/**
 * ADR-0127 Context, faults 1, 2, 3, 6, 8 and 9: each reproduced against a real lease service (real
 * Chromium, real Redis, real HTTP) by driving the sequence of events that caused it — answers lost
 * after the service acted (through the fault proxy), a browser worker restarted, a service clock
 * ahead of the run side — and shown fixed. Faults 4, 5 and 7 (where an execution ends) are in
 * `adr-0127-run-faults.test.ts`.
 */

const MINUTE_MS = 60_000;

let site: PressSite;
let redis: Redis;
const prefixes: string[] = [];

beforeAll(async () => {
  site = await startPressSite();
  redis = new Redis(testRedisUrl());
});

afterAll(async () => {
  await site?.close();
  for (const prefix of prefixes) await deletePrefixedKeys(redis, prefix);
  redis?.disconnect();
});

function newPrefix(label: string): string {
  const prefix = uniquePrefix(label);
  prefixes.push(prefix);
  return prefix;
}

/** One tool invocation's identity and limits, as the run loop gives them. */
const call = toolCalls((n) => `run-adr0127-a1-s${n}-i0`, { timeoutMs: 15_000 });

const hooks = () => ({ beforeDispatch: async () => undefined });

function provider(
  profileId: string,
  runId: string,
  findWorker: (profile: ProfileRef) => Promise<BrowserWorkerLocation | undefined>,
  options: { holderNeedsPage?: (runId: string) => Promise<boolean>; clock?: () => number } = {},
): BrowserLeaseProvider {
  return leaseProvider(profileId, runId, { principal: 'alice', findWorker, ...options });
}

function bodyOf(request: { body: Buffer } | undefined): Record<string, unknown> {
  return JSON.parse(request?.body.toString() ?? '{}') as Record<string, unknown>;
}

describe('ADR-0127 faults through a faulty network (faults 1, 3, 6, 8)', () => {
  const prefix = newPrefix('adr0127-net');
  let rig: LeaseRig;
  let leases: RedisLeaseStore;
  let store: RunStore;
  let sessionId: string;
  const viaProxy = (): Promise<BrowserWorkerLocation> => rig.viaProxy();

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix,
      principal: 'alice',
      profileIds: 'net',
      faultProxy: true,
      sharedSite: site,
      redis,
    });
    leases = rig.leases;
    store = new RunStore(redis, `${prefix}:`);
    sessionId = await createTestSession(store, 't1', { instructions: 'shop' });
  });

  afterAll(async () => {
    await rig?.close();
  });

  const seenFor = (method: string, path: RegExp, profileId: string) =>
    rig.proxy.seen(method, path).filter((request) => request.path.includes(`/profiles/${profileId}/`));

  it('fault 1: an acquire whose answer was lost is reattached by the next call asking a later horizon, instead of locking the profile', async () => {
    const profileId = await rig.newProfile();
    // A single acquisition attempt, so the lost answer reaches the run as the original fault saw it.
    const run = provider(profileId, 'run_f1', viaProxy);
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'drop_response' } });
    const contextsBefore = rig.worker.handle.browser.contexts().length;

    const firstHorizonMs = Date.now() + 5 * MINUTE_MS;
    const lost = await rejection(
      executeBrowserTool(
        run,
        'browser.navigate',
        { url: `${site.origin}/f1` },
        call({ leaseExpiresAtMs: firstHorizonMs }),
        hooks(),
      ),
    );
    expect(lost.code).toBe('provider_unavailable');
    const [dropped] = seenFor('POST', ACQUIRE, profileId);
    const created = JSON.parse(dropped?.upstreamBody?.toString() ?? '{}') as { lease_id: string };
    // The service did create the lease: the profile is held by this run attempt now.
    expect(await leases.liveLeaseId(rigProfile(profileId))).toBe(created.lease_id);

    // The next call asks a later fifteen-minute horizon, under its own idempotency key.
    const laterHorizonMs = Date.now() + 15 * MINUTE_MS;
    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f1` },
      call({ leaseExpiresAtMs: laterHorizonMs }),
      hooks(),
    );
    expect(navigated.observation.title).toBe('shop');
    const [first, second] = seenFor('POST', ACQUIRE, profileId);
    expect(second?.idempotencyKey).not.toBe(first?.idempotencyKey);
    expect(bodyOf(second).requested_expires_at_ms).toBeGreaterThan(
      bodyOf(first).requested_expires_at_ms as number,
    );
    // ADR-0127 d1: the same lease, reattached — not refused, and not a second lease or context.
    expect(second?.upstreamStatus).toBeLessThan(300);
    expect(run.lease).toMatchObject({ leaseId: created.lease_id, sequence: 1 });
    expect(rig.worker.handle.browser.contexts().length).toBe(contextsBefore + 1);
    expect(await leases.liveLeaseId(rigProfile(profileId))).toBe(created.lease_id);
    expect(site.hits.get('/f1')).toBe(1);
  });

  it('fault 3: a lost act answer retires the lease; the next call starts a fresh lease instead of being refused for its sequence', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_f3', viaProxy);
    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f3` },
      call(),
      hooks(),
    );
    const leaseId = run.lease?.leaseId ?? '';

    rig.proxy.inject({ method: 'POST', path: ACT, action: { kind: 'drop_response' } });
    // The retired lease cannot be closed for now either: the run side must not acquire meanwhile.
    rig.proxy.inject({ method: 'POST', path: CLOSE, action: { kind: 'status', status: 503 }, times: 10 });
    const lost = await rejection(
      executeBrowserTool(
        run,
        'browser.act',
        {
          revision: navigated.observation.revision,
          element: pressButton(navigated.observation).ref,
          action: 'click',
        },
        call(),
        hooks(),
      ),
    );
    // The service applied the click and advanced its sequence; the run side cannot know that.
    expect(lost).toMatchObject({ code: 'outcome_unknown', retryable: false });
    expect(await leases.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      state: 'live',
      sequence: 2,
      effects: 2,
    });
    expect(run.lease).toBeUndefined();
    expect(run.retiredLease).toMatchObject({ leaseId, sequence: 1 });

    // ADR-0127 d3: a retired lease that could not be closed is closed before anything is acquired.
    const acquiresBefore = seenFor('POST', ACQUIRE, profileId).length;
    const unclosed = await rejection(
      executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f3-next` }, call(), hooks()),
    );
    expect(unclosed.code).toBe('provider_unavailable');
    expect(seenFor('POST', ACQUIRE, profileId)).toHaveLength(acquiresBefore);
    expect(run.retiredLease).toMatchObject({ leaseId });
    expect(site.hits.get('/f3-next')).toBeUndefined();
    rig.proxy.clearFaults();

    const fresh = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f3-next` },
      call(),
      hooks(),
    );
    expect(fresh.observation.title).toBe('shop');
    const next = run.lease;
    expect(next?.leaseId).not.toBe(leaseId);
    expect(next?.sequence).toBe(1);
    // The fresh lease's first action carried sequence 1; the old lease's sequence was never reused.
    const navigations = seenFor('POST', NAVIGATE, profileId);
    expect(navigations.at(-1)?.path).toContain(`/leases/${next?.leaseId}/`);
    expect(bodyOf(navigations.at(-1)).sequence).toBe(1);
    expect(navigations.every((request) => request.upstreamStatus === 200)).toBe(true);
    expect(await leases.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });
    // The action itself was never sent again.
    expect(seenFor('POST', ACT, profileId)).toHaveLength(1);
  });

  it('fault 6: a run resumed by another worker reattaches to its live lease and sends action 2, not action 1 again', async () => {
    const profileId = await rig.newProfile();
    const firstWorker = provider(profileId, 'run_f6', viaProxy);
    const navigated = await executeBrowserTool(
      firstWorker,
      'browser.navigate',
      { url: `${site.origin}/f6` },
      call(),
      hooks(),
    );
    const leaseId = firstWorker.lease?.leaseId ?? '';

    // The run parks and resumes in another worker: a new provider, the same scope, a new invocation.
    const secondWorker = provider(profileId, 'run_f6', viaProxy);
    const acted = await executeBrowserTool(
      secondWorker,
      'browser.act',
      {
        revision: navigated.observation.revision,
        element: pressButton(navigated.observation).ref,
        action: 'click',
      },
      call(),
      hooks(),
    );
    expect(acted.observation.text).toContain('clicked');
    const [act] = seenFor('POST', ACT, profileId);
    expect(act?.path).toContain(`/leases/${leaseId}/`);
    expect(bodyOf(act).sequence).toBe(2);
    expect(act?.upstreamStatus).toBe(200);
    expect(secondWorker.lease).toMatchObject({ leaseId, sequence: 2 });
    expect(await leases.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      state: 'live',
      sequence: 2,
      effects: 2,
    });
  });

  it('fault 8: a newcomer run is refused while the holder run is parked or queued to resume, and replaces the lease only once the holder ended', async () => {
    const profileId = await rig.newProfile();
    const submit = async () =>
      (
        await store.submitRun({
          tenant: 't1',
          principal: 'alice',
          sessionId,
          input: 'x',
          limits: TEST_RUN_LIMITS,
          timeoutMs: 10 * MINUTE_MS,
        })
      ).run;
    // As the run worker composes it: the holder's status read from the run store.
    const holderNeedsPage = async (runId: string) => runNeedsPage((await store.getRun(runId))?.status);

    const holderRun = await submit();
    ran(await store.claimRun(holderRun.id, 1, 'holder-owner'));
    const holder = provider(profileId, holderRun.id, viaProxy, { holderNeedsPage });
    await executeBrowserTool(holder, 'browser.navigate', { url: `${site.origin}/f8` }, call(), hooks());
    const holderLeaseId = holder.lease?.leaseId ?? '';
    const { approvalId } = await store.requestApproval(holderRun.id, 'holder-owner', {
      invocationId: `${holderRun.id}-a1-s2-i0`,
      tool: 'browser.act',
      arguments: {},
    });
    expect((await store.getRun(holderRun.id))?.status).toBe('parked');

    const newcomerRun = await submit();
    ran(await store.claimRun(newcomerRun.id, 1, 'newcomer-owner'));
    const newcomer = provider(profileId, newcomerRun.id, viaProxy, { holderNeedsPage });
    const refusedWhileParked = await rejection(
      executeBrowserTool(newcomer, 'browser.navigate', { url: `${site.origin}/f8-new` }, call(), hooks()),
    );
    expect(refusedWhileParked.code).toBe('profile_unavailable');
    expect(refusedWhileParked.facts).toMatchObject({
      holder_run_id: holderRun.id,
      holder_lease_id: holderLeaseId,
    });

    // The owner approves: the holder is queued to resume, and still needs its page.
    expect((await store.approve('t1', approvalId, 'alice')).ok).toBe(true);
    expect((await store.getRun(holderRun.id))?.status).toBe('queued');
    const refusedWhileQueued = await rejection(
      executeBrowserTool(newcomer, 'browser.navigate', { url: `${site.origin}/f8-new` }, call(), hooks()),
    );
    expect(refusedWhileQueued.code).toBe('profile_unavailable');
    expect(seenFor('POST', CLOSE, profileId)).toHaveLength(0);
    expect(await leases.getLease(rigProfile(profileId), holderLeaseId)).toMatchObject({
      state: 'live',
      sealed: false,
    });
    expect((await leases.getProfile(rigProfile(profileId)))?.sealedAtMs).toBeUndefined();
    expect(site.hits.get('/f8-new')).toBeUndefined();

    // The holder resumes on its own page, untouched by the newcomer, and finishes.
    const resumed = provider(profileId, holderRun.id, viaProxy, { holderNeedsPage });
    await resumed.ensureLease('f8-resume', Date.now() + 10 * MINUTE_MS);
    expect(resumed.lease).toMatchObject({ leaseId: holderLeaseId, sequence: 1 });
    expect((await resumed.observe({})).observation.url).toBe(`${site.origin}/f8`);
    ran(await store.claimRun(holderRun.id, 2, 'holder-owner-2'));
    ran(await store.finishRun(holderRun.id, 'holder-owner-2', { status: 'succeeded', result: 'ok' }));

    // ADR-0127 d7: only now is the holder's lease sealed and replaced.
    const navigated = await executeBrowserTool(
      newcomer,
      'browser.navigate',
      { url: `${site.origin}/f8-new` },
      call(),
      hooks(),
    );
    expect(navigated.observation.title).toBe('shop');
    expect(newcomer.lease?.leaseId).not.toBe(holderLeaseId);
    expect(await leases.getLease(rigProfile(profileId), holderLeaseId)).toMatchObject({
      state: 'closed',
      closeReason: 'closed',
      sealed: true,
    });
  });
});

describe('ADR-0127 fault 2: a dead lease is dropped after a browser worker restart', () => {
  const prefix = newPrefix('adr0127-restart');
  let port: number;
  let worker: TestBrowserWorker | undefined;
  let registry: BrowserWorkerRegistry;
  let leases: RedisLeaseStore;

  const start = (onPort: number) =>
    startTestBrowserWorker({
      prefix,
      workerId: 'bw-restart',
      env: { BROWSER_WORKER_PORT: String(onPort) },
    });

  beforeAll(async () => {
    port = await freePort();
    worker = await start(port);
    registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    const admin = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    for (const id of ['restart-1', 'restart-2'])
      await admin.createProfile({ id, tenant: 't1', principal: 'alice', allowed_origins: [site.origin] });
  });

  afterAll(async () => {
    await worker?.handle.close();
  });

  const findWorker = (profile: ProfileRef) => registry.findForProfile(profile);

  it('fault 2: after a browser worker restart revoked the lease, the next call drops the dead reference and the one after acquires a fresh lease', async () => {
    const run = provider('restart-1', 'run_f2_restart', findWorker);
    await executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f2` }, call(), hooks());
    const deadLeaseId = run.lease?.leaseId ?? '';

    // The browser worker restarts at its address; the new process revokes the lease it has no page for.
    await worker?.handle.close();
    worker = await start(port);
    expect(await leases.getLease(rigProfile('restart-1'), deadLeaseId)).toMatchObject({
      state: 'closed',
      closeReason: 'revoked',
      sealed: false,
    });

    const refused = await rejection(executeBrowserTool(run, 'browser.observe', {}, call(), hooks()));
    expect(refused.code).toBe('lease_expired');
    // ADR-0127 d2: the dead reference is dropped, not reused.
    expect(run.lease).toBeUndefined();

    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f2-again` },
      call(),
      hooks(),
    );
    expect(navigated.observation.title).toBe('shop');
    expect(run.lease?.leaseId).not.toBe(deadLeaseId);
    expect(run.lease).toMatchObject({ workerId: 'bw-restart', sequence: 1 });
  });

  // ADR-0127 d2-d3: the retired lease is closed where its worker answers now (the registry's address
  // for the same provider reference), so a worker that moved does not keep the run from a browser.
  it('fault 2: after a browser worker restart at another address, the next calls acquire a fresh lease from the worker the registry names', async () => {
    const run = provider('restart-2', 'run_f2_moved', findWorker);
    await executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f2-moved` }, call(), hooks());
    const deadLeaseId = run.lease?.leaseId ?? '';

    await worker?.handle.close();
    const oldPort = port;
    while (port === oldPort) port = await freePort();
    worker = await start(port);
    expect(await leases.getLease(rigProfile('restart-2'), deadLeaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });

    // The old address answers nothing: the lease is dropped as untrusted (d2).
    const lost = await rejection(executeBrowserTool(run, 'browser.observe', {}, call(), hooks()));
    expect(lost.code).toBe('provider_unavailable');
    expect(run.lease).toBeUndefined();

    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f2-moved-again` },
      call(),
      hooks(),
    );
    expect(navigated.observation.title).toBe('shop');
    expect(run.lease?.leaseId).not.toBe(deadLeaseId);
  });
});

describe('ADR-0127 faults 2 and 9 on a service clock ahead of the run side', () => {
  const prefix = newPrefix('adr0127-clock');
  const clock = new TestClock();
  let rig: LeaseRig;
  let leases: RedisLeaseStore;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix,
      principal: 'alice',
      profileIds: 'clock',
      // The service's expiry sweep stays idle, so a late close reaches the service before its sweep.
      worker: { clock, env: { LEASE_EXPIRY_SWEEP_INTERVAL_MS: String(60 * MINUTE_MS) } },
      faultProxy: true,
      sharedSite: site,
      redis,
    });
    leases = rig.leases;
  });

  afterAll(async () => {
    await rig?.close();
  });

  const viaProxy = (): Promise<BrowserWorkerLocation> => rig.viaProxy();

  it('fault 2: a lease revoked by an operator is dropped at the next call, and the call after acquires afresh', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_f2_revoked', viaProxy, { clock: clock.now });
    await executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f2r` }, call(), hooks());
    const revokedId = run.lease?.leaseId ?? '';
    await rig.admin.close(rigProfile(profileId), revokedId, { seal: false });

    const refused = await rejection(executeBrowserTool(run, 'browser.observe', {}, call(), hooks()));
    expect(refused.code).toBe('lease_expired');
    expect(run.lease).toBeUndefined();
    await executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f2r` }, call(), hooks());
    expect(run.lease?.leaseId).not.toBe(revokedId);
  });

  it('fault 2: a lease the service holds expired under clock skew is dropped, and the next call acquires afresh', async () => {
    const profileId = await rig.newProfile();
    // The run side's clock stands still; the service's runs sixteen minutes ahead.
    const runSideClock = new TestClock();
    const run = provider(profileId, 'run_f2_skew', viaProxy, { clock: runSideClock.now });
    await executeBrowserTool(run, 'browser.navigate', { url: `${site.origin}/f2s` }, call(), hooks());
    const skewedId = run.lease?.leaseId ?? '';
    clock.advance(16 * MINUTE_MS);

    const refused = await rejection(executeBrowserTool(run, 'browser.observe', {}, call(), hooks()));
    expect(refused.code).toBe('lease_expired');
    expect(run.lease).toBeUndefined();
    expect(await leases.getLease(rigProfile(profileId), skewedId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });

    const navigated = await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f2s` },
      call({ leaseExpiresAtMs: clock.now() + 10 * MINUTE_MS }),
      hooks(),
    );
    expect(navigated.observation.title).toBe('shop');
    expect(run.lease?.leaseId).not.toBe(skewedId);
  });

  it('fault 9: a close retried after expiry never seals: the run side does not send it, and the service closes a late one unsealed before its sweep', async () => {
    const profileId = await rig.newProfile();
    const run = provider(profileId, 'run_f9', viaProxy, { clock: clock.now });
    await executeBrowserTool(
      run,
      'browser.navigate',
      { url: `${site.origin}/f9` },
      call({ leaseExpiresAtMs: clock.now() + 10 * MINUTE_MS }),
      hooks(),
    );
    const held = run.lease;
    const leaseId = held?.leaseId ?? '';

    // The run's end asks to seal, but the close is lost before it reaches the service.
    rig.proxy.inject({ method: 'POST', path: CLOSE, action: { kind: 'reset' } });
    const lost = await rejection(run.close({ seal: true }));
    expect(lost.code).toBe('provider_unavailable');
    expect(run.lease).toMatchObject({ leaseId });

    // The retry comes after the lease expired: the provider does not ask (ADR-0127 consequences).
    clock.advance(11 * MINUTE_MS);
    const closesBefore = rig.proxy.seen('POST', CLOSE).length;
    expect(await run.close({ seal: true })).toBeUndefined();
    expect(rig.proxy.seen('POST', CLOSE)).toHaveLength(closesBefore);
    expect(run.lease).toBeUndefined();
    expect(await leases.getLease(rigProfile(profileId), leaseId)).toMatchObject({ state: 'live' });

    // A late close that still reaches the service (another holder of the reference, a clock behind)
    // arrives before the sweep: ADR-0127 d8, it is closed unsealed, and nothing reaches the profile.
    const late = await new DataPlaneClient({ baseUrl: rig.proxy.url, token: TEST_TOKEN }).close(
      rigProfile(profileId),
      leaseId,
      {
        seal: true,
      },
    );
    expect(late).toMatchObject({ state: 'closed', sealed: false, close_reason: 'expired' });
    expect((await leases.getProfile(rigProfile(profileId)))?.sealedAtMs).toBeUndefined();
    expect(held?.expiresAtMs).toBeLessThanOrEqual(clock.now());
  });
});
