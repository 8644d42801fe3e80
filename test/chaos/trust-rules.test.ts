import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type BrowserLeaseProvider, executeBrowserTool } from '../../libs/provider/index.js';
import { startFaultProxy } from '../fixtures/fault-proxy.js';
import {
  ACQUIRE_PATH as ACQUIRE,
  ACT_PATH as ACT,
  CLOSE_PATH as CLOSE,
  dispatchCounter as counter,
  LeaseRig,
  OBSERVE_PATH as OBSERVE,
  rejection,
  rigProfile,
  toolCalls,
} from '../fixtures/lease-rig.js';
import { pressButton as button, pressPage } from '../fixtures/press-site.js';
import { uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0127 decisions 2 and 3, clause by clause, through a fault-injecting proxy between the run side
 * and a real lease service (real Chromium, real Redis): which failures drop a lease, which action
 * outcomes are unknown, and that an untrusted lease is closed before the provider acquires again.
 */
describe('the provider drops a lease it can no longer trust', () => {
  let rig: LeaseRig;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix: uniquePrefix('chaos-trust'),
      principal: 'owner',
      profileIds: 'trust',
      faultProxy: true,
      page: pressPage('ledger'),
    });
  });

  afterEach(() => rig.proxy.clearFaults());

  afterAll(async () => {
    await rig?.close();
  });

  /** A run's provider; `where.url` is where the registry says the browser worker answers now. */
  function runSide(
    profileId: string,
    runId: string,
    where: { url: string } = { url: rig.proxy.url },
    options: { fetch?: typeof fetch } = {},
  ): BrowserLeaseProvider {
    return rig.provider(profileId, runId, {
      findWorker: async () => ({ id: 'bw-test', url: where.url }),
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  const call = toolCalls((n) => `run-trust-a1-s${n}-i0`, { timeoutMs: 10_000 });

  function requestsOf(leaseId: string, path: RegExp) {
    return rig.seenFor(path, leaseId);
  }

  /** A provider with a lease on a navigated page: the lease id and the page's observation. */
  async function navigated(profileId: string, runId: string, where?: { url: string }) {
    const provider = runSide(profileId, runId, where);
    const result = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${rig.origin}/page` },
      call(),
      counter(),
    );
    const leaseId = provider.lease?.leaseId ?? '';
    expect(leaseId).not.toBe('');
    return { provider, leaseId, observation: result.observation };
  }

  /** The next call on the provider: a fresh lease, the old one closed unsealed, one context for the run. */
  async function expectFreshLease(
    provider: BrowserLeaseProvider,
    profileId: string,
    oldLeaseId: string,
    contextsBefore: number,
  ) {
    const next = await executeBrowserTool(provider, 'browser.observe', {}, call(), counter());
    expect(next.observation.url).toBe('about:blank');
    const fresh = provider.lease;
    expect(fresh?.leaseId).toBeDefined();
    expect(fresh?.leaseId).not.toBe(oldLeaseId);
    expect(fresh?.sequence).toBe(0);
    expect(provider.retiredLease).toBeUndefined();
    expect(await rig.admin.getLease(rigProfile(profileId), oldLeaseId)).toMatchObject({
      state: 'closed',
      sealed: false,
    });
    expect(rig.contexts()).toBe(contextsBefore + 1);
  }

  describe('d2: profile_unavailable, provider_unavailable or an unexpected failure drops the lease', () => {
    const observeFaults: Array<{ name: string; inject: () => void; transport?: string; status?: number }> = [
      {
        name: 'an observe answered 503',
        inject: () =>
          rig.proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'status', status: 503 } }),
        status: 503,
      },
      {
        name: 'an observe whose connection is reset',
        inject: () => rig.proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'reset' } }),
        transport: 'connection_lost',
      },
      {
        name: 'an observe answered with something that is not a page answer',
        inject: () =>
          rig.proxy.inject({
            method: 'POST',
            path: OBSERVE,
            action: { kind: 'status', status: 200, body: '{"observation":"garbled"}' },
          }),
        transport: 'invalid_answer',
      },
    ];

    for (const fault of observeFaults)
      it(`drops and closes the lease after ${fault.name}; the next call acquires a fresh one`, async () => {
        const profileId = await rig.newProfile();
        const contextsBefore = rig.contexts();
        const { provider, leaseId } = await navigated(profileId, `run_obs_${rig.profileCount}`);
        fault.inject();
        const error = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
        expect(error.code).toBe('provider_unavailable');
        if (fault.status) expect(error.httpStatus).toBe(fault.status);
        if (fault.transport) expect(error.transport).toBe(fault.transport);
        expect(provider.lease).toBeUndefined();
        // Closed where it still can be: at once, unsealed, before any next call.
        expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
          state: 'closed',
          sealed: false,
        });
        expect(rig.contexts()).toBe(contextsBefore);
        await expectFreshLease(provider, profileId, leaseId, contextsBefore);
      });

    it('drops the lease when an act is answered profile_unavailable: that code, no effect', async () => {
      const profileId = await rig.newProfile();
      const contextsBefore = rig.contexts();
      const { provider, leaseId, observation } = await navigated(profileId, 'run_act_refused_lease');
      rig.proxy.inject({
        method: 'POST',
        path: ACT,
        action: {
          kind: 'status',
          status: 409,
          body: '{"error":{"code":"profile_unavailable","message":"revoked"}}',
        },
      });
      const error = await rejection(
        executeBrowserTool(
          provider,
          'browser.act',
          { revision: observation.revision, element: button(observation).ref, action: 'click' },
          call(),
          counter(),
        ),
      );
      expect(error).toMatchObject({ code: 'profile_unavailable', retryable: false });
      expect(requestsOf(leaseId, ACT)).toHaveLength(1);
      expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
        state: 'closed',
        sealed: false,
        sequence: 1,
        effects: 1,
      });
      await expectFreshLease(provider, profileId, leaseId, contextsBefore);
    });

    it('drops the lease when an act never reaches a browser worker that moved, and closes it where the worker is now', async () => {
      const profileId = await rig.newProfile();
      const contextsBefore = rig.contexts();
      // The registry first says the worker answers behind a proxy that then goes away.
      const gone = await startFaultProxy(rig.worker.url);
      const where = { url: gone.url };
      const { provider, leaseId, observation } = await navigated(profileId, 'run_moved', where);
      await gone.close();
      // Let the client's pool see its kept-alive socket closed, so the act finds the port refusing.
      await new Promise((resolve) => setTimeout(resolve, 100));
      where.url = rig.proxy.url;
      const hooks = counter();
      const error = await rejection(
        executeBrowserTool(
          provider,
          'browser.act',
          { revision: observation.revision, element: button(observation).ref, action: 'click' },
          call(),
          hooks,
        ),
      );
      // Nothing reached the service, and an effect is never retried.
      expect(error).toMatchObject({
        code: 'provider_unavailable',
        retryable: false,
        transport: 'not_connected',
      });
      expect(hooks.calls).toBe(1);
      expect(provider.lease).toBeUndefined();
      expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
        sequence: 1,
        effects: 1,
      });
      await expectFreshLease(provider, profileId, leaseId, contextsBefore);
    });
  });

  describe('d3: an action without an answer, or answered other than a refusal, is outcome_unknown', () => {
    it('an act whose answer is lost after the service acted: outcome_unknown, sent once, lease retired and closed', async () => {
      const profileId = await rig.newProfile();
      const contextsBefore = rig.contexts();
      const { provider, leaseId, observation } = await navigated(profileId, 'run_act_lost');
      rig.proxy.inject({ method: 'POST', path: ACT, action: { kind: 'drop_response' } });
      const hooks = counter();
      const error = await rejection(
        executeBrowserTool(
          provider,
          'browser.act',
          { revision: observation.revision, element: button(observation).ref, action: 'click' },
          call(),
          hooks,
        ),
      );
      expect(error).toMatchObject({ code: 'outcome_unknown', retryable: false });
      expect(hooks.calls).toBe(1);
      // The service acted exactly once; the provider never sent the act again.
      expect(requestsOf(leaseId, ACT)).toHaveLength(1);
      expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
        state: 'closed',
        sealed: false,
        sequence: 2,
        effects: 2,
      });
      expect(provider.lease).toBeUndefined();
      await expectFreshLease(provider, profileId, leaseId, contextsBefore);
      expect(requestsOf(leaseId, ACT)).toHaveLength(1);
    });

    const unanswered: Array<{ name: string; inject: () => void }> = [
      {
        name: 'answered 503 by the network',
        inject: () =>
          rig.proxy.inject({ method: 'POST', path: ACT, action: { kind: 'status', status: 503 } }),
      },
      {
        name: 'whose connection is reset',
        inject: () => rig.proxy.inject({ method: 'POST', path: ACT, action: { kind: 'reset' } }),
      },
      {
        name: 'answered 500 internal',
        inject: () =>
          rig.proxy.inject({
            method: 'POST',
            path: ACT,
            action: { kind: 'status', status: 500, body: '{"error":{"code":"internal","message":"x"}}' },
          }),
      },
    ];

    for (const fault of unanswered)
      it(`an act ${fault.name} is outcome_unknown, sent once, and retires the lease`, async () => {
        const profileId = await rig.newProfile();
        const contextsBefore = rig.contexts();
        const { provider, leaseId, observation } = await navigated(profileId, `run_act_${rig.profileCount}`);
        fault.inject();
        const error = await rejection(
          executeBrowserTool(
            provider,
            'browser.act',
            { revision: observation.revision, element: button(observation).ref, action: 'click' },
            call(),
            counter(),
          ),
        );
        expect(error).toMatchObject({ code: 'outcome_unknown', retryable: false });
        expect(requestsOf(leaseId, ACT)).toHaveLength(1);
        expect(provider.lease).toBeUndefined();
        expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
          state: 'closed',
          sealed: false,
          effects: 1,
        });
        await expectFreshLease(provider, profileId, leaseId, contextsBefore);
      });

    it('keeps the code, the lease and its sequence for refusals given before dispatch', async () => {
      const profileId = await rig.newProfile();
      const { provider, leaseId, observation } = await navigated(profileId, 'run_refusals');
      const target = button(observation);

      const changed = await rejection(
        executeBrowserTool(
          provider,
          'browser.act',
          { revision: 'not-this-revision', element: target.ref, action: 'click' },
          call(),
          counter(),
        ),
      );
      expect(changed).toMatchObject({ code: 'page_changed', retryable: false });
      const missing = await rejection(
        executeBrowserTool(
          provider,
          'browser.act',
          { revision: observation.revision, element: 'e9999', action: 'click' },
          call(),
          counter(),
        ),
      );
      expect(missing).toMatchObject({ code: 'element_not_found', retryable: false });

      expect(provider.lease).toMatchObject({ leaseId, sequence: 1 });
      expect(provider.retiredLease).toBeUndefined();
      expect(requestsOf(leaseId, CLOSE)).toHaveLength(0);
      expect(await rig.admin.getLease(rigProfile(profileId), leaseId)).toMatchObject({
        state: 'live',
        sequence: 1,
        effects: 1,
      });

      // The same lease acts on: its sequence was never desynchronised.
      const acted = await executeBrowserTool(
        provider,
        'browser.act',
        { revision: observation.revision, element: target.ref, action: 'click' },
        call(),
        counter(),
      );
      expect(acted.observation.text).toContain('clicked');
      expect(provider.lease).toMatchObject({ leaseId, sequence: 2 });
    });
  });

  describe('d3: a lease that could not be closed is closed before the next acquire', () => {
    it('closes the retired lease before acquiring, and acquires nothing while it cannot', async () => {
      const profileId = await rig.newProfile();
      const contextsBefore = rig.contexts();
      const seenAtAcquire: string[] = [];
      const where = { url: rig.proxy.url };
      // Records the old lease's state at the moment each acquire leaves the provider.
      let oldLeaseId = '';
      const watching: typeof fetch = async (input, init) => {
        const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
        if (oldLeaseId && init?.method === 'POST' && ACQUIRE.test(new URL(url).pathname))
          seenAtAcquire.push((await rig.admin.getLease(rigProfile(profileId), oldLeaseId)).state);
        return fetch(input, init);
      };
      const provider = runSide(profileId, 'run_close_fails', where, { fetch: watching });
      await executeBrowserTool(
        provider,
        'browser.navigate',
        { url: `${rig.origin}/page` },
        call(),
        counter(),
      );
      oldLeaseId = provider.lease?.leaseId ?? '';

      // The observe fails, and so do the close at the drop and the close before the next acquire.
      rig.proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'status', status: 503 } });
      rig.proxy.inject({ method: 'POST', path: CLOSE, action: { kind: 'status', status: 503 }, times: 2 });
      const dropped = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
      expect(dropped).toMatchObject({ code: 'provider_unavailable', operation: 'observe' });
      expect(provider.lease).toBeUndefined();
      expect(provider.retiredLease).toMatchObject({ leaseId: oldLeaseId });
      expect(await rig.admin.getLease(rigProfile(profileId), oldLeaseId)).toMatchObject({ state: 'live' });

      const acquiresBefore = rig.proxy.seen('POST', ACQUIRE).length;
      const blocked = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
      // Acquiring now would reattach to the untrusted lease (same scope): the call fails instead.
      expect(blocked).toMatchObject({ code: 'provider_unavailable', operation: 'close' });
      expect(rig.proxy.seen('POST', ACQUIRE).length).toBe(acquiresBefore);
      expect(provider.retiredLease).toMatchObject({ leaseId: oldLeaseId });

      await expectFreshLease(provider, profileId, oldLeaseId, contextsBefore);
      expect(seenAtAcquire).toEqual(['closed']);
      const closes = requestsOf(oldLeaseId, CLOSE).map((request) => request.action);
      expect(closes).toEqual(['status', 'status', 'pass']);
    });
  });
});
