import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { BrowserObservation } from '../../libs/contracts/index.js';
import {
  BrowserLeaseProvider,
  DataPlaneClient,
  executeBrowserTool,
  ProviderError,
} from '../../libs/provider/index.js';
import { startTestBrowserWorker, TEST_TOKEN, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { type FaultProxy, startFaultProxy } from '../fixtures/fault-proxy.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const ACQUIRE = /^\/v1\/profiles\/[^/]+\/leases$/;
const OBSERVE = /\/observe$/;
const ACT = /\/act$/;
const CLOSE = /\/close$/;

/**
 * ADR-0127 decisions 2 and 3, clause by clause, through a fault-injecting proxy between the run side
 * and a real lease service (real Chromium, real Redis): which failures drop a lease, which action
 * outcomes are unknown, and that an untrusted lease is closed before the provider acquires again.
 */
describe('the provider drops a lease it can no longer trust', () => {
  const prefix = uniquePrefix('chaos-trust');
  let worker: TestBrowserWorker;
  let proxy: FaultProxy;
  let redis: Redis;
  let admin: DataPlaneClient;
  let site: Server;
  let origin: string;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    proxy = await startFaultProxy(worker.url);
    redis = new Redis(testRedisUrl());
    admin = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(
        "<!doctype html><title>ledger</title><button onclick=\"document.body.insertAdjacentHTML('beforeend', '<p>clicked</p>')\">Press me</button>",
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  afterEach(() => proxy.clearFaults());

  afterAll(async () => {
    await proxy?.close();
    await worker?.handle.close();
    await new Promise((resolve) => site?.close(resolve));
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  let profiles = 0;
  async function newProfile(): Promise<string> {
    profiles += 1;
    const id = `trust-${profiles}`;
    await admin.createProfile({ id, tenant: 't1', principal: 'owner', allowed_origins: [origin] });
    return id;
  }

  /** A run's provider; `where.url` is where the registry says the browser worker answers now. */
  function runSide(
    profileId: string,
    runId: string,
    where: { url: string } = { url: proxy.url },
    options: { fetch?: typeof fetch } = {},
  ): BrowserLeaseProvider {
    return new BrowserLeaseProvider({
      scope: { tenant: 't1', principal: 'owner', run_id: runId, attempt: 1 },
      profileId,
      findWorker: async () => ({ id: 'bw-test', url: where.url }),
      token: TEST_TOKEN,
      holderNeedsPage: async () => true,
      ...(options.fetch ? { fetch: options.fetch } : {}),
    });
  }

  let invocations = 0;
  function call() {
    invocations += 1;
    return {
      invocationId: `run-trust-a1-s${invocations}-i0`,
      requestedLeaseExpiresAtMs: Date.now() + 10 * 60_000,
      deadlineMs: Date.now() + 10_000,
    };
  }

  function counter() {
    const hooks = {
      calls: 0,
      beforeDispatch: () => {
        hooks.calls += 1;
      },
    };
    return hooks;
  }

  async function rejection(promise: Promise<unknown>): Promise<ProviderError> {
    const error = await promise.then(
      () => undefined,
      (reason: unknown) => reason,
    );
    expect(error).toBeInstanceOf(ProviderError);
    return error as ProviderError;
  }

  function button(observation: BrowserObservation) {
    const found = observation.elements.find(
      (element) => element.role === 'button' && element.name === 'Press me',
    );
    if (!found) throw new Error('the fixture page has no button');
    return found;
  }

  function contexts(): number {
    return worker.handle.browser.contexts().length;
  }

  function requestsOf(leaseId: string, path: RegExp) {
    return proxy.seen('POST', path).filter((request) => request.path.includes(`/${leaseId}/`));
  }

  /** A provider with a lease on a navigated page: the lease id and the page's observation. */
  async function navigated(profileId: string, runId: string, where?: { url: string }) {
    const provider = runSide(profileId, runId, where);
    const result = await executeBrowserTool(
      provider,
      'browser.navigate',
      { url: `${origin}/page` },
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
    expect(await admin.getLease(profileId, oldLeaseId)).toMatchObject({ state: 'closed', sealed: false });
    expect(contexts()).toBe(contextsBefore + 1);
  }

  describe('d2: profile_unavailable, provider_unavailable or an unexpected failure drops the lease', () => {
    const observeFaults: Array<{ name: string; inject: () => void; transport?: string; status?: number }> = [
      {
        name: 'an observe answered 503',
        inject: () =>
          proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'status', status: 503 } }),
        status: 503,
      },
      {
        name: 'an observe whose connection is reset',
        inject: () => proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'reset' } }),
        transport: 'connection_lost',
      },
      {
        name: 'an observe answered with something that is not a page answer',
        inject: () =>
          proxy.inject({
            method: 'POST',
            path: OBSERVE,
            action: { kind: 'status', status: 200, body: '{"observation":"garbled"}' },
          }),
        transport: 'invalid_answer',
      },
    ];

    for (const fault of observeFaults)
      it(`drops and closes the lease after ${fault.name}; the next call acquires a fresh one`, async () => {
        const profileId = await newProfile();
        const contextsBefore = contexts();
        const { provider, leaseId } = await navigated(profileId, `run_obs_${profiles}`);
        fault.inject();
        const error = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
        expect(error.code).toBe('provider_unavailable');
        if (fault.status) expect(error.httpStatus).toBe(fault.status);
        if (fault.transport) expect(error.transport).toBe(fault.transport);
        expect(provider.lease).toBeUndefined();
        // Closed where it still can be: at once, unsealed, before any next call.
        expect(await admin.getLease(profileId, leaseId)).toMatchObject({ state: 'closed', sealed: false });
        expect(contexts()).toBe(contextsBefore);
        await expectFreshLease(provider, profileId, leaseId, contextsBefore);
      });

    it('drops the lease when an act is answered profile_unavailable: that code, no effect', async () => {
      const profileId = await newProfile();
      const contextsBefore = contexts();
      const { provider, leaseId, observation } = await navigated(profileId, 'run_act_refused_lease');
      proxy.inject({
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
      expect(await admin.getLease(profileId, leaseId)).toMatchObject({
        state: 'closed',
        sealed: false,
        sequence: 1,
        effects: 1,
      });
      await expectFreshLease(provider, profileId, leaseId, contextsBefore);
    });

    it('drops the lease when an act never reaches a browser worker that moved, and closes it where the worker is now', async () => {
      const profileId = await newProfile();
      const contextsBefore = contexts();
      // The registry first says the worker answers behind a proxy that then goes away.
      const gone = await startFaultProxy(worker.url);
      const where = { url: gone.url };
      const { provider, leaseId, observation } = await navigated(profileId, 'run_moved', where);
      await gone.close();
      // Let the client's pool see its kept-alive socket closed, so the act finds the port refusing.
      await new Promise((resolve) => setTimeout(resolve, 100));
      where.url = proxy.url;
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
      expect(await admin.getLease(profileId, leaseId)).toMatchObject({ sequence: 1, effects: 1 });
      await expectFreshLease(provider, profileId, leaseId, contextsBefore);
    });
  });

  describe('d3: an action without an answer, or answered other than a refusal, is outcome_unknown', () => {
    it('an act whose answer is lost after the service acted: outcome_unknown, sent once, lease retired and closed', async () => {
      const profileId = await newProfile();
      const contextsBefore = contexts();
      const { provider, leaseId, observation } = await navigated(profileId, 'run_act_lost');
      proxy.inject({ method: 'POST', path: ACT, action: { kind: 'drop_response' } });
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
      expect(await admin.getLease(profileId, leaseId)).toMatchObject({
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
        inject: () => proxy.inject({ method: 'POST', path: ACT, action: { kind: 'status', status: 503 } }),
      },
      {
        name: 'whose connection is reset',
        inject: () => proxy.inject({ method: 'POST', path: ACT, action: { kind: 'reset' } }),
      },
      {
        name: 'answered 500 internal',
        inject: () =>
          proxy.inject({
            method: 'POST',
            path: ACT,
            action: { kind: 'status', status: 500, body: '{"error":{"code":"internal","message":"x"}}' },
          }),
      },
    ];

    for (const fault of unanswered)
      it(`an act ${fault.name} is outcome_unknown, sent once, and retires the lease`, async () => {
        const profileId = await newProfile();
        const contextsBefore = contexts();
        const { provider, leaseId, observation } = await navigated(profileId, `run_act_${profiles}`);
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
        expect(await admin.getLease(profileId, leaseId)).toMatchObject({
          state: 'closed',
          sealed: false,
          effects: 1,
        });
        await expectFreshLease(provider, profileId, leaseId, contextsBefore);
      });

    it('keeps the code, the lease and its sequence for refusals given before dispatch', async () => {
      const profileId = await newProfile();
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
      expect(await admin.getLease(profileId, leaseId)).toMatchObject({
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
      const profileId = await newProfile();
      const contextsBefore = contexts();
      const seenAtAcquire: string[] = [];
      const where = { url: proxy.url };
      // Records the old lease's state at the moment each acquire leaves the provider.
      let oldLeaseId = '';
      const watching: typeof fetch = async (input, init) => {
        const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
        if (oldLeaseId && init?.method === 'POST' && ACQUIRE.test(new URL(url).pathname))
          seenAtAcquire.push((await admin.getLease(profileId, oldLeaseId)).state);
        return fetch(input, init);
      };
      const provider = runSide(profileId, 'run_close_fails', where, { fetch: watching });
      await executeBrowserTool(provider, 'browser.navigate', { url: `${origin}/page` }, call(), counter());
      oldLeaseId = provider.lease?.leaseId ?? '';

      // The observe fails, and so do the close at the drop and the close before the next acquire.
      proxy.inject({ method: 'POST', path: OBSERVE, action: { kind: 'status', status: 503 } });
      proxy.inject({ method: 'POST', path: CLOSE, action: { kind: 'status', status: 503 }, times: 2 });
      const dropped = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
      expect(dropped).toMatchObject({ code: 'provider_unavailable', operation: 'observe' });
      expect(provider.lease).toBeUndefined();
      expect(provider.retiredLease).toMatchObject({ leaseId: oldLeaseId });
      expect(await admin.getLease(profileId, oldLeaseId)).toMatchObject({ state: 'live' });

      const acquiresBefore = proxy.seen('POST', ACQUIRE).length;
      const blocked = await rejection(executeBrowserTool(provider, 'browser.observe', {}, call(), counter()));
      // Acquiring now would reattach to the untrusted lease (same scope): the call fails instead.
      expect(blocked).toMatchObject({ code: 'provider_unavailable', operation: 'close' });
      expect(proxy.seen('POST', ACQUIRE).length).toBe(acquiresBefore);
      expect(provider.retiredLease).toMatchObject({ leaseId: oldLeaseId });

      await expectFreshLease(provider, profileId, oldLeaseId, contextsBefore);
      expect(seenAtAcquire).toEqual(['closed']);
      const closes = requestsOf(oldLeaseId, CLOSE).map((request) => request.action);
      expect(closes).toEqual(['status', 'status', 'pass']);
    });
  });
});
