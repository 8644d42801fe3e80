import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  type AcquireAttemptDiagnostic,
  acquireBackoffMs,
  BOUNDED_ACQUIRE_RETRY,
  type BrowserLeaseProvider,
  executeBrowserTool,
} from '../../libs/provider/index.js';
import {
  ACQUIRE_PATH as ACQUIRE,
  ACT_PATH as ACT,
  dispatchCounter as counter,
  LeaseRig,
  NAVIGATE_PATH as NAVIGATE,
  rejection,
  rigProfile,
  toolCalls,
} from '../fixtures/lease-rig.js';
import { pressButton as button, pressPage } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0177's verification through a fault-injecting proxy between the run side and a real lease
 * service (real Chromium, real Redis): a transient acquisition failure, recovered within three
 * attempts of one tool invocation, and no replay of anything but acquisition.
 */
describe('bounded acquisition retry through a faulty network', () => {
  let rig: LeaseRig;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('chaos-acquire'),
      principal: 'owner',
      profileIds: 'chaos',
      faultProxy: true,
      page: pressPage('briefing'),
    });
  });

  afterEach(() => rig.proxy.clearFaults());

  afterAll(async () => {
    await rig?.close();
  });

  interface RunSide {
    provider: BrowserLeaseProvider;
    diagnostics: AcquireAttemptDiagnostic[];
  }

  function runSide(
    profileId: string,
    runId: string,
    options: {
      retry?: boolean;
      principal?: string;
      token?: string;
      onAcquireAttempt?: (diagnostic: AcquireAttemptDiagnostic) => Promise<void> | void;
    } = {},
  ): RunSide {
    const diagnostics: AcquireAttemptDiagnostic[] = [];
    const provider = rig.provider(profileId, runId, {
      ...(options.principal ? { principal: options.principal } : {}),
      ...(options.token ? { token: options.token } : {}),
      ...(options.retry === false ? {} : { acquireRetry: BOUNDED_ACQUIRE_RETRY }),
      onAcquireAttempt: async (diagnostic) => {
        diagnostics.push(diagnostic);
        await options.onAcquireAttempt?.(diagnostic);
      },
    });
    return { provider, diagnostics };
  }

  const call = toolCalls((n) => `run-chaos-a1-s${n}-i0`, { timeoutMs: 10_000 });

  function acquiresOf(profileId: string) {
    return rig.seenFor(ACQUIRE, profileId);
  }

  it('without the recovery policy, one 503 on acquire stops the tool call', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_single', { retry: false });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 } });
    const hooks = counter();
    const error = await rejection(
      executeBrowserTool(provider, 'browser.navigate', { url: `${rig.origin}/single` }, call(), hooks),
    );
    expect(error).toMatchObject({ code: 'provider_unavailable', retryable: true, httpStatus: 503 });
    expect(hooks.calls).toBe(0);
    expect(acquiresOf(profileId)).toHaveLength(1);
    expect(rig.hits.get('/single')).toBeUndefined();
    expect(diagnostics).toMatchObject([{ attempt: 1, outcome: 'failed', next: 'stop' }]);
  });

  it('recovers from one 503 on acquire at the second attempt, after the first backoff', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_second');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 } });
    const hooks = counter();
    const limits = call();
    const navigated = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/second` },
      limits,
      hooks,
    );
    expect(navigated.observation.title).toBe('briefing');
    expect(hooks.calls).toBe(1);
    const attempts = acquiresOf(profileId);
    expect(attempts.map((attempt) => attempt.action)).toEqual(['status', 'pass']);
    const gapMs = (attempts[1]?.receivedAtMs ?? 0) - (attempts[0]?.receivedAtMs ?? 0);
    // The delay the retry chose lies in ADR-0177's first window and was waited out. How much
    // later than that the request arrived measures the machine's load, not the retry.
    const delayMs = acquireBackoffMs(limits.invocationId, 1);
    expect(delayMs).toBeGreaterThanOrEqual(250);
    expect(delayMs).toBeLessThanOrEqual(500);
    expect(gapMs).toBeGreaterThanOrEqual(delayMs - 5);
    expect(diagnostics).toEqual([
      expect.objectContaining({
        invocation_id: limits.invocationId,
        attempt: 1,
        max_attempts: 3,
        outcome: 'failed',
        code: 'provider_unavailable',
        http_status: 503,
        next: 'retry',
        delay_ms: acquireBackoffMs(limits.invocationId, 1),
      }),
    ]);
  });

  it('recovers at the third attempt after a reset and a 503, within both backoff windows', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_third');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'reset' } });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 } });
    const limits = call();
    await executeBrowserTool(provider, 'browser.navigate', { url: `${rig.origin}/third` }, limits, counter());
    const attempts = acquiresOf(profileId);
    expect(attempts.map((attempt) => attempt.action)).toEqual(['reset', 'status', 'pass']);
    const firstGapMs = (attempts[1]?.receivedAtMs ?? 0) - (attempts[0]?.receivedAtMs ?? 0);
    const secondGapMs = (attempts[2]?.receivedAtMs ?? 0) - (attempts[1]?.receivedAtMs ?? 0);
    // Each chosen delay lies in its ADR-0177 window and was waited out (the arrival past it is load).
    const [firstDelayMs, secondDelayMs] = diagnostics.map((diagnostic) => diagnostic.delay_ms ?? -1);
    expect(firstDelayMs).toBeGreaterThanOrEqual(250);
    expect(firstDelayMs).toBeLessThanOrEqual(500);
    expect(secondDelayMs).toBeGreaterThanOrEqual(500);
    expect(secondDelayMs).toBeLessThanOrEqual(1_000);
    expect(firstGapMs).toBeGreaterThanOrEqual((firstDelayMs ?? 0) - 5);
    expect(secondGapMs).toBeGreaterThanOrEqual((secondDelayMs ?? 0) - 5);
    expect(
      diagnostics.map((diagnostic) => [diagnostic.attempt, diagnostic.transport, diagnostic.next]),
    ).toEqual([
      [1, 'connection_lost', 'retry'],
      [2, null, 'retry'],
    ]);
    expect(rig.hits.get('/third')).toBe(1);
  });

  it('sends the byte-identical request, under the same key, on every attempt', async () => {
    const profileId = await rig.newProfile();
    const { provider } = runSide(profileId, 'run_identical');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 502 } });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'drop_response' } });
    const limits = call();
    await provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits);
    const attempts = acquiresOf(profileId);
    expect(attempts).toHaveLength(3);
    const [first, ...rest] = attempts;
    expect(first?.body.length).toBeGreaterThan(0);
    for (const attempt of rest) {
      expect(attempt.body.equals(first?.body ?? Buffer.alloc(0))).toBe(true);
      expect(attempt.idempotencyKey).toBe(first?.idempotencyKey);
    }
    expect(JSON.parse(first?.body.toString() ?? '{}')).toMatchObject({
      run_id: 'run_identical',
      attempt: 1,
      requested_expires_at_ms: limits.requestedLeaseExpiresAtMs,
    });
  });

  it('stops at three attempts and keeps the original stable error', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_exhausted');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 }, times: 10 });
    const hooks = counter();
    const error = await rejection(
      executeBrowserTool(provider, 'browser.navigate', { url: `${rig.origin}/exhausted` }, call(), hooks),
    );
    expect(error).toMatchObject({ code: 'provider_unavailable', retryable: true, httpStatus: 503 });
    expect(acquiresOf(profileId)).toHaveLength(3);
    expect(hooks.calls).toBe(0);
    expect(
      diagnostics.map((diagnostic) => [diagnostic.attempt, diagnostic.next, diagnostic.stop_reason]),
    ).toEqual([
      [1, 'retry', null],
      [2, 'retry', null],
      [3, 'stop', 'exhausted'],
    ]);
    expect(provider.lease).toBeUndefined();
  });

  it('stops at once on authentication, protected account, contention, invalid output and non-retryable failures', async () => {
    const cases: Array<{
      name: string;
      prepare: (profileId: string) => Promise<RunSide>;
      code: string;
    }> = [
      {
        name: 'a refused token',
        prepare: async (profileId) =>
          runSide(profileId, 'run_auth', { token: 'not-the-token-0123456789abcdef' }),
        code: 'provider_unavailable',
      },
      {
        name: 'a protected profile',
        prepare: async (profileId) => runSide(profileId, 'run_protected', { principal: 'intruder' }),
        code: 'profile_unavailable',
      },
      {
        name: "another run's lease",
        prepare: async (profileId) => {
          const holder = runSide(profileId, 'run_holder', { retry: false });
          const limits = call();
          await holder.provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits);
          return runSide(profileId, 'run_contender');
        },
        code: 'profile_unavailable',
      },
      {
        name: 'an answer that is not a lease',
        prepare: async (profileId) => {
          rig.proxy.inject({
            method: 'POST',
            path: ACQUIRE,
            action: { kind: 'status', status: 201, body: '{"lease":"garbled"}' },
          });
          return runSide(profileId, 'run_invalid');
        },
        code: 'provider_unavailable',
      },
      {
        name: 'an internal error',
        prepare: async (profileId) => {
          rig.proxy.inject({
            method: 'POST',
            path: ACQUIRE,
            action: { kind: 'status', status: 500, body: '{"error":{"code":"internal","message":"x"}}' },
          });
          return runSide(profileId, 'run_internal');
        },
        code: 'provider_unavailable',
      },
    ];
    for (const { name, prepare, code } of cases) {
      const profileId = await rig.newProfile({ protected: name === 'a protected profile' });
      const side = await prepare(profileId);
      const before = acquiresOf(profileId).length;
      const limits = call();
      const error = await rejection(
        side.provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits),
      );
      expect({ name, code: error.code, retryable: error.retryable }).toEqual({
        name,
        code,
        retryable: false,
      });
      expect({ name, attempts: acquiresOf(profileId).length - before }).toEqual({ name, attempts: 1 });
      expect(side.diagnostics).toMatchObject([{ attempt: 1, next: 'stop', stop_reason: 'not_retryable' }]);
      rig.proxy.clearFaults();
    }
  });

  it('stops at once when the lease a lost answer created was revoked before the retry', async () => {
    const profileId = await rig.newProfile();
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'drop_response' } });
    const { provider, diagnostics } = runSide(profileId, 'run_revoked', {
      onAcquireAttempt: async () => {
        // An operator revokes the lease the service created while its answer was lost.
        const lost = acquiresOf(profileId)[0]?.upstreamBody?.toString() ?? '{}';
        await rig.admin.close(rigProfile(profileId), (JSON.parse(lost) as { lease_id: string }).lease_id, {
          seal: false,
        });
      },
    });
    const limits = call();
    const error = await rejection(
      provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits),
    );
    expect(error).toMatchObject({ code: 'lease_expired', retryable: false });
    expect(acquiresOf(profileId)).toHaveLength(2);
    expect(diagnostics.map((diagnostic) => [diagnostic.attempt, diagnostic.next])).toEqual([
      [1, 'retry'],
      [2, 'stop'],
    ]);
  });

  it('stops during a backoff when the run is cancelled, without another attempt', async () => {
    const profileId = await rig.newProfile();
    const controller = new AbortController();
    let abortedAtMs = 0;
    const { provider, diagnostics } = runSide(profileId, 'run_cancelled', {
      onAcquireAttempt: (diagnostic) => {
        if (diagnostic.next === 'retry')
          setTimeout(() => {
            abortedAtMs = performance.now();
            controller.abort();
          }, 50);
      },
    });
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 }, times: 10 });
    const hooks = counter();
    const error = await rejection(
      executeBrowserTool(
        provider,
        'browser.navigate',
        { url: `${rig.origin}/cancelled` },
        call({ signal: controller.signal }),
        hooks,
      ),
    );
    expect(performance.now() - abortedAtMs).toBeLessThan(150);
    // The original failure, not a new one.
    expect(error).toMatchObject({ code: 'provider_unavailable', httpStatus: 503 });
    expect(acquiresOf(profileId)).toHaveLength(1);
    expect(hooks.calls).toBe(0);
    expect(
      diagnostics.map((diagnostic) => [diagnostic.attempt, diagnostic.outcome, diagnostic.stop_reason]),
    ).toEqual([
      [1, 'failed', null],
      [2, 'not_sent', 'cancelled'],
    ]);
  });

  it('does not sleep past the tool deadline: a backoff that would outlast it stops at once', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_deadline');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'status', status: 503 }, times: 10 });
    const limits = call({ timeoutMs: 200 });
    const error = await rejection(
      provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits),
    );
    // No deadline is extended: the call ends by its deadline (plus scheduling slack), not after a sleep.
    expect(Date.now()).toBeLessThanOrEqual(limits.deadlineMs + 100);
    expect(error).toMatchObject({ code: 'provider_unavailable', httpStatus: 503 });
    expect(acquiresOf(profileId)).toHaveLength(1);
    expect(diagnostics).toMatchObject([
      { attempt: 1, next: 'stop', delay_ms: null, stop_reason: 'deadline' },
    ]);
  });

  it('does not retry an attempt that used the deadline up', async () => {
    const profileId = await rig.newProfile();
    const { provider, diagnostics } = runSide(profileId, 'run_slow');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'delay', ms: 3_000 } });
    const limits = call({ timeoutMs: 600 });
    const error = await rejection(
      provider.ensureLease(limits.invocationId, limits.requestedLeaseExpiresAtMs, limits),
    );
    expect(Date.now()).toBeLessThanOrEqual(limits.deadlineMs + 100);
    expect(error).toMatchObject({ code: 'provider_unavailable', transport: 'timeout' });
    expect(acquiresOf(profileId)).toHaveLength(1);
    expect(diagnostics).toMatchObject([
      { attempt: 1, transport: 'timeout', next: 'stop', stop_reason: 'deadline' },
    ]);
  });

  it('reattaches after an acquire answer lost once the service created the lease: one context, one navigation', async () => {
    const profileId = await rig.newProfile();
    const { provider } = runSide(profileId, 'run_lost_acquire');
    rig.proxy.inject({ method: 'POST', path: ACQUIRE, action: { kind: 'drop_response' } });
    const contextsBefore = rig.worker.handle.browser.contexts().length;
    const hooks = counter();
    const navigated = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/lost-acquire` },
      call(),
      hooks,
    );
    expect(navigated.observation.title).toBe('briefing');
    const attempts = acquiresOf(profileId);
    expect(attempts.map((attempt) => attempt.action)).toEqual(['drop_response', 'pass']);
    const created = JSON.parse(attempts[0]?.upstreamBody?.toString() ?? '{}') as { lease_id: string };
    expect(provider.lease?.leaseId).toBe(created.lease_id);
    expect(rig.worker.handle.browser.contexts().length).toBe(contextsBefore + 1);
    expect(rig.hits.get('/lost-acquire')).toBe(1);
    expect(hooks.calls).toBe(1);
    expect(await rig.admin.getLease(rigProfile(profileId), created.lease_id)).toMatchObject({
      state: 'live',
      sequence: 1,
      effects: 1,
    });
  });

  it('never replays a navigate or an act whose answer was lost: the service acted once', async () => {
    const profileId = await rig.newProfile();
    const { provider } = runSide(profileId, 'run_lost_effects');
    const navigated = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/effects` },
      call(),
      counter(),
    );
    const leaseId = provider.lease?.leaseId ?? '';

    rig.proxy.inject({ method: 'POST', path: ACT, action: { kind: 'drop_response' } });
    const lostAct = await rejection(
      executeBrowserTool(
        provider,
        'browser.act',
        {
          revision: navigated.observation.revision,
          element: button(navigated.observation).ref,
          action: 'click',
        },
        call(),
        counter(),
      ),
    );
    expect(lostAct).toMatchObject({ code: 'outcome_unknown', retryable: false });
    expect(rig.proxy.seen('POST', ACT).filter((request) => request.path.includes(leaseId))).toHaveLength(1);
    expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
      sequence: 2,
      effects: 2,
    });

    // The next call starts afresh on a new lease; its navigate's answer is lost too.
    rig.proxy.inject({ method: 'POST', path: NAVIGATE, action: { kind: 'drop_response' } });
    const lostNavigate = await rejection(
      executeBrowserTool(
        provider,
        'browser.navigate',
        { url: `${rig.origin}/effects-lost` },
        call(),
        counter(),
      ),
    );
    expect(lostNavigate).toMatchObject({ code: 'outcome_unknown', retryable: false });
    const navigates = rig.proxy.seen('POST', NAVIGATE).filter((request) => request.path.includes(profileId));
    expect(navigates.map((request) => request.action)).toEqual(['pass', 'drop_response']);
    const freshLeaseId = provider.retiredLease?.leaseId ?? '';
    expect(freshLeaseId).not.toBe(leaseId);
    expect(rig.hits.get('/effects-lost')).toBe(1);
    expect(await rig.admin.getLease(rigProfile(profileId), freshLeaseId)).toMatchObject({
      sequence: 1,
      effects: 1,
    });
  });
});
