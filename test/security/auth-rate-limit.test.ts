import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { TEST_TOKEN, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { isOneErrorShape, rawRequest } from './auth-raw-http.js';
import { type BothServers, startBothServers } from './both-servers.js';

/**
 * Failed authentication is limited per client address on both servers: past N
 * failures a minute, further failures answer 429 `rate_limited` with Retry-After; a right
 * credential always passes. Counted in Redis, one key per address.
 */
const LIMIT = 3;
const apiPrefix = uniquePrefix('auth-rl-api');
const dpPrefix = uniquePrefix('auth-rl-dp');
let api: ApiHandle;
let worker: TestBrowserWorker;
let redis: Redis;
let apiKey: string;
let both: BothServers;

beforeAll(async () => {
  both = await startBothServers({ apiPrefix, dpPrefix, env: { AUTH_FAILURES_PER_MINUTE: String(LIMIT) } });
  ({ api, worker, redis } = both);
  ({ key: apiKey } = await api.store.createApiKey({
    tenant: 'acme',
    principal: 'alice',
    scopes: ['runs:read'],
  }));
});

afterAll(async () => {
  await both?.close();
});

const servers = () => [
  { name: 'API', url: api.url, prefix: apiPrefix, right: `Bearer ${apiKey}`, target: '/v1/models' },
  {
    name: 'data plane',
    url: worker.url,
    prefix: dpPrefix,
    right: `Bearer ${TEST_TOKEN}`,
    target: '/v1/worker',
  },
];

describe.each(['API', 'data plane'])('failed authentication on the %s', (name) => {
  const server = () =>
    servers().find((candidate) => candidate.name === name) as ReturnType<typeof servers>[number];
  const wrong = { authorization: 'Bearer wrong-credential-0123456789abcdef' };

  it('answers 401 to the first N failures of an address, then 429 with Retry-After', async () => {
    const { url, target, prefix } = server();
    for (let failure = 1; failure <= LIMIT; failure += 1) {
      const answer = await rawRequest(url, 'GET', target, { headers: wrong });
      expect(answer.status, `failure ${failure}`).toBe(401);
    }
    // Past the limit every kind of failure is refused alike: no credential, an unknown path, a router error.
    for (const [target2, headers] of [
      [target, wrong],
      [target, {}],
      ['/no/such/route', {}],
      ['/v1/runs/%ff', wrong],
    ] as const) {
      const answer = await rawRequest(url, 'GET', target2, { headers });
      expect(answer.status, target2).toBe(429);
      expect(isOneErrorShape(answer, 'rate_limited')).toBe(true);
      const retryAfterS = Number(answer.headers['retry-after']);
      expect(retryAfterS).toBeGreaterThanOrEqual(1);
      expect(retryAfterS).toBeLessThanOrEqual(60);
      expect(answer.json.error.message).not.toContain('wrong-credential');
    }
    const counted = await redis.pttl(`${prefix}:auth-failures:127.0.0.1`);
    expect(counted).toBeGreaterThan(0);
    expect(counted).toBeLessThanOrEqual(60_000);
  });

  it('lets a right credential through while the address is over its limit', async () => {
    const { url, target, right } = server();
    const answer = await rawRequest(url, 'GET', target, { headers: { authorization: right } });
    expect(answer.status).toBe(200);
    expect((await rawRequest(url, 'GET', target, { headers: wrong })).status).toBe(429);
  });

  it('counts afresh once the window has passed', async () => {
    const { url, target, prefix } = server();
    // The window is a minute; end it now instead of waiting for it.
    await redis.pexpire(`${prefix}:auth-failures:127.0.0.1`, 1);
    await expect.poll(() => redis.exists(`${prefix}:auth-failures:127.0.0.1`)).toBe(0);
    const answer = await rawRequest(url, 'GET', target, { headers: wrong });
    expect(answer.status).toBe(401);
    expect(await redis.get(`${prefix}:auth-failures:127.0.0.1`)).toBe('1');
  });
});

describe("the dashboard's own gate", () => {
  it('counts its failed sign-ins against the address like the API does', async () => {
    await redis.del(`${apiPrefix}:auth-failures:127.0.0.1`);
    const wrongBasic = { authorization: `Basic ${btoa('admin:not-a-key')}` };
    for (let failure = 1; failure <= LIMIT; failure += 1) {
      const answer = await rawRequest(api.url, 'GET', '/admin/queues', { headers: wrongBasic });
      expect(answer.status, `failure ${failure}`).toBe(401);
      expect(answer.headers['www-authenticate']).toBe('Basic realm="Leasehold dashboard"');
    }
    const limited = await rawRequest(api.url, 'GET', '/admin/queues', { headers: wrongBasic });
    expect(limited.status).toBe(429);
    expect(isOneErrorShape(limited, 'rate_limited')).toBe(true);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // The API's own doors share the count: the address is over its limit there too.
    expect((await rawRequest(api.url, 'GET', '/v1/models')).status).toBe(429);
  });
});
