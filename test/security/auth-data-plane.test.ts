import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_TOKEN,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { isOneErrorShape, rawRequest } from './auth-raw-http.js';

/**
 * The data plane decided authentication on the raw URL (`/v1/` prefix),
 * while the router decodes it, so `/%761/profiles` answered every tenant's profiles with no token.
 * Now it is decided per route after routing, default-deny: every spelling needs the token.
 */
const prefix = uniquePrefix('auth-dp');
const bearer = { authorization: `Bearer ${TEST_TOKEN}` };
const json = { 'content-type': 'application/json' };
let worker: TestBrowserWorker;
let redis: Redis;
let leaseId: string;

/** Tenant `acme`'s protected profile, with a live lease held by its owner's run. */
const PROFILES = '/v1/tenants/acme/profiles';

beforeAll(async () => {
  worker = await startTestBrowserWorker({ prefix, env: { AUTH_FAILURES_PER_MINUTE: '1000' } });
  redis = new Redis(testRedisUrl());
  const created = await worker.call('POST', PROFILES, {
    body: {
      id: 'vault',
      tenant: 'acme',
      principal: 'alice',
      allowed_origins: ['http://127.0.0.1'],
      protected: true,
    },
  });
  expect(created.status).toBe(201);
  const acquired = await worker.call('POST', `${PROFILES}/vault/leases`, {
    idempotencyKey: idemKey(),
    body: {
      tenant: 'acme',
      principal: 'alice',
      run_id: 'run_owner',
      attempt: 1,
      requested_expires_at_ms: worker.clock.now() + 60_000,
    },
  });
  expect(acquired.status).toBe(201);
  leaseId = acquired.body.lease_id;
});

afterAll(async () => {
  await worker?.handle.close();
  await deletePrefixedKeys(redis, prefix);
  redis?.disconnect();
});

/** Every way of spelling a protected path that the router forgives or that names no route. */
const SPELLINGS: Array<[method: string, target: string]> = [
  ['GET', '/v1/worker'],
  ['GET', '/%761/worker'],
  ['GET', '/%76%31/%77orker'],
  ['GET', 'http://x/v1/worker'],
  ['GET', 'http://x/%761/worker'],
  ['GET', '//v1/worker'],
  ['GET', '/v1//worker'],
  ['GET', '/V1/WORKER'],
  ['GET', '/v1/worker/'],
  ['GET', '/v1/worker?tenant=acme'],
  ['HEAD', '/v1/worker'],
  ['HEAD', '/%761/worker'],
  ['OPTIONS', '/v1/worker'],
  ['OPTIONS', '*'],
  ['GET', '/%761/tenants/acme/profiles'],
  ['GET', `http://x${PROFILES}`],
  ['GET', '/%761/profiles'],
  ['GET', '/v1/profiles'],
  ['GET', '/no/such/route'],
  ['DELETE', '/v1/worker'],
  ['GET', '/healthz/../v1/worker'],
  ['GET', '/%2e%2e/v1/worker'],
];

describe('the data plane without its token', () => {
  it.each(SPELLINGS)('refuses %s %s with 401 in the one error shape and no data', async (method, target) => {
    const answer = await rawRequest(worker.url, method, target);
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer');
    if (method !== 'HEAD') {
      expect(isOneErrorShape(answer, 'unauthorized')).toBe(true);
      expect(answer.json.error.message).toBe('a valid data-plane token is required');
    }
    expect(answer.text).not.toContain('vault');
    expect(answer.text).not.toContain('bw-test');
  });

  it('refuses a wrong token, a token in another scheme and an empty bearer alike', async () => {
    for (const authorization of [
      `Bearer ${TEST_TOKEN}x`,
      `Basic ${btoa(`x:${TEST_TOKEN}`)}`,
      'Bearer ',
      TEST_TOKEN,
    ]) {
      const answer = await rawRequest(worker.url, 'GET', '/%761/worker', { headers: { authorization } });
      expect(answer.status).toBe(401);
      expect(isOneErrorShape(answer, 'unauthorized')).toBe(true);
    }
  });

  it('reaches the same route with the token whatever its spelling, so the refusals above are real', async () => {
    for (const target of ['/v1/worker', '/%761/worker', 'http://x/v1/worker']) {
      const answer = await rawRequest(worker.url, 'GET', target, { headers: bearer });
      expect(answer.status, target).toBe(200);
      expect(answer.json.id).toBe('bw-test');
    }
    const listed = await rawRequest(worker.url, 'GET', '/%761/tenants/acme/profiles', { headers: bearer });
    expect(listed.status).toBe(200);
    expect(listed.json.profiles.map((profile: { id: string }) => profile.id)).toEqual(['vault']);
  });

  it('refuses the reproducers of finding 1: list, acquire a protected profile, create a profile, close a lease', async () => {
    const listed = await rawRequest(worker.url, 'GET', '/%761/tenants/acme/profiles');
    expect(listed.status).toBe(401);

    const acquired = await rawRequest(worker.url, 'POST', '/%761/tenants/acme/profiles/vault/leases', {
      headers: { ...json, 'idempotency-key': idemKey() },
      body: JSON.stringify({
        tenant: 'acme',
        principal: 'alice',
        run_id: 'run_thief',
        attempt: 1,
        requested_expires_at_ms: worker.clock.now() + 60_000,
      }),
    });
    expect(acquired.status).toBe(401);

    const created = await rawRequest(worker.url, 'POST', 'http://x/v1/tenants/acme/profiles', {
      headers: json,
      body: JSON.stringify({
        id: 'planted',
        tenant: 'acme',
        principal: 'mallory',
        allowed_origins: ['http://127.0.0.1'],
      }),
    });
    expect(created.status).toBe(401);

    const closed = await rawRequest(
      worker.url,
      'POST',
      `/%761/tenants/acme/profiles/vault/leases/${leaseId}/close`,
      {
        headers: { ...json, 'idempotency-key': idemKey() },
        body: JSON.stringify({ seal: false }),
      },
    );
    expect(closed.status).toBe(401);

    // Nothing happened: the owner's lease is still live and no profile was planted.
    const lease = await worker.call('GET', `${PROFILES}/vault/leases/${leaseId}`);
    expect(lease.status).toBe(200);
    expect(lease.body.state).toBe('live');
    const planted = await worker.call('GET', `${PROFILES}/planted`);
    expect(planted.status).toBe(404);
  });

  it('answers health, readiness and metrics to anyone', async () => {
    expect((await rawRequest(worker.url, 'GET', '/healthz')).json).toEqual({ status: 'ok' });
    expect((await rawRequest(worker.url, 'GET', '/readyz')).status).toBe(200);
    const metrics = await rawRequest(worker.url, 'GET', '/metrics');
    expect(metrics.status).toBe(200);
    expect(metrics.text).toContain('# TYPE');
  });
});
