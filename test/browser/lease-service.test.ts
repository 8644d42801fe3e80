import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { unsealState } from '../../libs/lease/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_SEAL_KEY,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const MINUTE = 60_000;

describe('the lease service over real Chromium', () => {
  const prefix = uniquePrefix('lease');
  let worker: TestBrowserWorker;
  let redis: Redis;
  let site: Server;
  let siteOrigin: string;
  let profileCount = 0;

  beforeAll(async () => {
    worker = await startTestBrowserWorker({ prefix });
    redis = new Redis(testRedisUrl());
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>site</title><p>hello</p>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    siteOrigin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
  });

  afterAll(async () => {
    await worker?.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
    await new Promise((resolve) => site.close(resolve));
  });

  async function newProfile(overrides: Record<string, unknown> = {}): Promise<string> {
    profileCount += 1;
    const id = `p${profileCount}`;
    const created = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id, tenant: 't1', principal: 'owner', allowed_origins: [siteOrigin], ...overrides },
    });
    expect(created.status).toBe(201);
    return id;
  }

  function acquire(profileId: string, overrides: Record<string, unknown> = {}, key = idemKey()) {
    return worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: key,
      body: {
        tenant: 't1',
        principal: 'owner',
        run_id: 'run_a',
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + 60 * MINUTE,
        ...overrides,
      },
    });
  }

  const contexts = () => worker.handle.browser.contexts().length;

  it('creates one browser context per lease, expiring at most 15 minutes ahead', async () => {
    const before = contexts();
    const profileId = await newProfile();
    const answer = await acquire(profileId);
    expect(answer.status).toBe(201);
    expect(answer.body).toMatchObject({
      created: true,
      state: 'live',
      sequence: 0,
      effects: 0,
      provider_ref: 'bw-test',
    });
    expect(answer.body.expires_at_ms - answer.body.acquired_at_ms).toBe(15 * MINUTE);
    expect(contexts()).toBe(before + 1);
    await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases/${answer.body.lease_id}/close`, {
      idempotencyKey: idemKey(),
      body: { seal: false },
    });
    expect(contexts()).toBe(before);
  });

  it('reattaches a repeated acquire that differs only in its deadline (one context, not two)', async () => {
    const profileId = await newProfile();
    const before = contexts();
    const first = await acquire(profileId);
    const again = await acquire(profileId, { requested_expires_at_ms: worker.clock.now() + 20 * MINUTE });
    expect(again.status).toBe(200);
    expect(again.body.created).toBe(false);
    expect(again.body.lease_id).toBe(first.body.lease_id);
    expect(again.body.expires_at_ms).toBe(first.body.expires_at_ms);
    expect(contexts()).toBe(before + 1);
    expect(worker.handle.pages.openContexts()).toBeGreaterThanOrEqual(1);
  });

  it('refuses another run, and another attempt of the same run, naming the holder', async () => {
    const profileId = await newProfile();
    await acquire(profileId, { run_id: 'run_holder', attempt: 3 });
    for (const other of [
      { run_id: 'run_other', attempt: 3 },
      { run_id: 'run_holder', attempt: 4 },
    ]) {
      const refused = await acquire(profileId, other);
      expect(refused.status).toBe(409);
      expect(refused.body.error).toMatchObject({
        code: 'profile_unavailable',
        holder_run_id: 'run_holder',
        holder_attempt: 3,
      });
    }
  });

  it('admits before it publishes: unknown profile, other tenant, protected profile', async () => {
    expect((await acquire('nope')).status).toBe(404);
    const profileId = await newProfile({ protected: true });
    expect((await acquire(profileId, { tenant: 't2' })).status).toBe(404);
    const refused = await acquire(profileId, { principal: 'stranger' });
    expect(refused.status).toBe(409);
    expect(refused.body.error.code).toBe('profile_unavailable');
    expect(await redis.get(`${prefix}:{prf:t1/${profileId}}:live`)).toBeNull();
    expect((await acquire(profileId)).status).toBe(201);
  });

  it('renews in steps of at most 15 minutes and never past 60 minutes after acquire', async () => {
    const profileId = await newProfile();
    const acquired = (await acquire(profileId)).body;
    const path = `/v1/tenants/t1/profiles/${profileId}/leases/${acquired.lease_id}/renew`;
    const renew = (requestedMs: number) =>
      worker.call('POST', path, {
        idempotencyKey: idemKey(),
        body: { requested_expires_at_ms: requestedMs },
      });

    worker.clock.advance(10 * MINUTE);
    const step = await renew(worker.clock.now() + 60 * MINUTE);
    expect(step.status).toBe(200);
    expect(step.body.expires_at_ms).toBe(worker.clock.now() + 15 * MINUTE);

    worker.clock.advance(14 * MINUTE);
    await renew(worker.clock.now() + 60 * MINUTE);
    worker.clock.advance(14 * MINUTE);
    await renew(worker.clock.now() + 60 * MINUTE);
    worker.clock.advance(14 * MINUTE);
    const capped = await renew(worker.clock.now() + 60 * MINUTE);
    expect(capped.body.expires_at_ms).toBe(acquired.acquired_at_ms + 60 * MINUTE);
    const still = await renew(worker.clock.now() + 60 * MINUTE);
    expect(still.body.expires_at_ms).toBe(acquired.acquired_at_ms + 60 * MINUTE);
    worker.clock.offsetMs = 0;
  });

  it('fails renewing an expired lease and closes it unsealed', async () => {
    const profileId = await newProfile();
    const acquired = (await acquire(profileId)).body;
    const context = worker.handle.browser.contexts().at(-1);
    worker.clock.advance(16 * MINUTE);
    try {
      const renewed = await worker.call(
        'POST',
        `/v1/tenants/t1/profiles/${profileId}/leases/${acquired.lease_id}/renew`,
        {
          idempotencyKey: idemKey(),
          body: { requested_expires_at_ms: worker.clock.now() + 10 * MINUTE },
        },
      );
      expect(renewed.status).toBe(409);
      expect(renewed.body.error.code).toBe('lease_expired');
      const lease = await worker.call(
        'GET',
        `/v1/tenants/t1/profiles/${profileId}/leases/${acquired.lease_id}`,
      );
      expect(lease.body).toMatchObject({ state: 'closed', close_reason: 'expired', sealed: false });
      // The lease's own context is gone (the sweep may close other tests' leases too at this hour).
      expect(context && worker.handle.browser.contexts().includes(context)).toBe(false);
    } finally {
      worker.clock.offsetMs = 0;
    }
  });

  it('seals a cookie and local storage on a clean close and restores them in the next lease', async () => {
    const profileId = await newProfile();
    const first = (await acquire(profileId)).body;
    const context = worker.handle.browser.contexts().at(-1);
    const page = context?.pages()[0];
    if (!context || !page) throw new Error('no context for the lease');
    await page.goto(`${siteOrigin}/`);
    await page.evaluate(() => {
      // biome-ignore lint/suspicious/noDocumentCookie: the page sets the cookie a login would.
      document.cookie = 'session=sealed-cookie-value; path=/; max-age=3600';
      localStorage.setItem('draft', 'sealed-local-value');
    });
    // A cookie set from script reaches Chromium's cookie store asynchronously (a login's Set-Cookie
    // header does not): wait until the store has it, as the page's next request would.
    for (let tries = 0; tries < 50; tries += 1) {
      if ((await context.cookies()).some((cookie) => cookie.value === 'sealed-cookie-value')) break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const closed = await worker.call(
      'POST',
      `/v1/tenants/t1/profiles/${profileId}/leases/${first.lease_id}/close`,
      {
        idempotencyKey: idemKey(),
        body: { seal: true },
      },
    );
    expect(closed.body).toMatchObject({ state: 'closed', sealed: true, close_reason: 'closed' });

    const stored = await redis.hget(`${prefix}:{prf:t1/${profileId}}:profile`, 'sealed');
    expect(stored).toBeTruthy();
    expect(stored).not.toContain('sealed-cookie-value');
    expect(stored).not.toContain('sealed-local-value');
    expect(Buffer.from((stored as string).slice(3), 'base64').toString('latin1')).not.toContain(
      'sealed-cookie-value',
    );
    const plain = JSON.stringify(
      unsealState(stored as string, Buffer.from(TEST_SEAL_KEY, 'base64'), `t1/${profileId}`),
    );
    expect(plain).toContain('sealed-cookie-value');

    const profile = await worker.call('GET', `/v1/tenants/t1/profiles/${profileId}`);
    expect(profile.body.sealed).toBe(true);
    expect(JSON.stringify(profile.body)).not.toContain('sealed-cookie-value');

    await acquire(profileId, { run_id: 'run_b' });
    const next = worker.handle.browser.contexts().at(-1)?.pages()[0];
    if (!next) throw new Error('no page for the second lease');
    await next.goto(`${siteOrigin}/`);
    expect(await next.evaluate(() => [document.cookie, localStorage.getItem('draft')])).toEqual([
      'session=sealed-cookie-value',
      'sealed-local-value',
    ]);
  });

  it('never seals an expired lease, however late the close arrives', async () => {
    const profileId = await newProfile();
    const first = (await acquire(profileId)).body;
    const page = worker.handle.browser.contexts().at(-1)?.pages()[0];
    if (!page) throw new Error('no page');
    await page.goto(`${siteOrigin}/`);
    await page.evaluate(() => {
      // biome-ignore lint/suspicious/noDocumentCookie: the page sets the cookie a login would.
      document.cookie = 'late=should-not-seal; path=/';
    });
    worker.clock.advance(15 * MINUTE + 1);
    try {
      const closed = await worker.call(
        'POST',
        `/v1/tenants/t1/profiles/${profileId}/leases/${first.lease_id}/close`,
        {
          idempotencyKey: idemKey(),
          body: { seal: true },
        },
      );
      expect(closed.body).toMatchObject({ state: 'closed', sealed: false, close_reason: 'expired' });
      expect(await redis.hget(`${prefix}:{prf:t1/${profileId}}:profile`, 'sealed')).toBeNull();
    } finally {
      worker.clock.offsetMs = 0;
    }
  });

  it('closes expired leases in its sweep, and their pages are really gone', async () => {
    const profileId = await newProfile();
    const lease = (await acquire(profileId)).body;
    const context = worker.handle.browser.contexts().at(-1);
    expect(context?.pages().length).toBe(1);
    worker.clock.advance(16 * MINUTE);
    try {
      const deadline = Date.now() + 5_000;
      while (context && worker.handle.browser.contexts().includes(context) && Date.now() < deadline)
        await new Promise((resolve) => setTimeout(resolve, 50));
      expect(context?.pages().length).toBe(0);
      expect(worker.handle.browser.contexts()).not.toContain(context);
      // The context goes first (nothing a page holds may outlive it), the record's close after it.
      await expect
        .poll(
          async () =>
            (await worker.call('GET', `/v1/tenants/t1/profiles/${profileId}/leases/${lease.lease_id}`)).body,
        )
        .toMatchObject({ state: 'closed', close_reason: 'expired' });
    } finally {
      worker.clock.offsetMs = 0;
    }
  });

  it('replays an acquire with the same Idempotency-Key and body, and refuses it with another body', async () => {
    const profileId = await newProfile();
    const key = idemKey();
    const body = {
      tenant: 't1',
      principal: 'owner',
      run_id: 'run_i',
      attempt: 1,
      requested_expires_at_ms: Date.now() + MINUTE,
    };
    const first = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: key,
      body,
    });
    const before = contexts();
    const replay = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: key,
      body,
    });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replayed')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect(contexts()).toBe(before);
    const conflict = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: key,
      body: { ...body, requested_expires_at_ms: body.requested_expires_at_ms + 1 },
    });
    expect(conflict.status).toBe(409);
    expect(conflict.body.error.code).toBe('idempotency_conflict');
    const missing = await worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, { body });
    expect(missing.status).toBe(422);
  });

  it('answers 401 without the token, 413 past 64 KiB and 422 naming the bad field', async () => {
    expect((await worker.call('GET', '/v1/tenants/t1/profiles', { token: null })).status).toBe(401);
    expect((await worker.call('GET', '/v1/tenants/t1/profiles', { token: 'x'.repeat(40) })).status).toBe(401);
    const big = await worker.call('POST', '/v1/tenants/t1/profiles', {
      rawBody: JSON.stringify({ pad: 'x'.repeat(70_000) }),
    });
    expect(big.status).toBe(413);
    expect(big.body.error.code).toBe('payload_too_large');
    const bad = await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'ok', tenant: 't1', principal: 'owner', allowed_origins: ['ftp://nope'] },
    });
    expect(bad.status).toBe(422);
    expect(bad.body.error).toMatchObject({ code: 'validation_failed', field: 'body.allowed_origins.0' });
  });
});
