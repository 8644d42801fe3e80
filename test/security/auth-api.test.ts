import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { startTestApi } from '../fixtures/api.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { isOneErrorShape, rawRequest } from './auth-raw-http.js';

/**
 * On the API: authentication decided per route after routing, default-deny. Routes
 * checked their key in a preHandler, so unknown paths and router errors answered without one
 * (and told a stranger which paths exist); now nothing but the marked public routes answers
 * without a key, whatever the URL's spelling.
 */
const prefix = uniquePrefix('auth-api');
let api: ApiHandle;
let redis: Redis;
let key: string;

beforeAll(async () => {
  api = await startTestApi(prefix, { AUTH_FAILURES_PER_MINUTE: '1000' });
  redis = new Redis(testRedisUrl());
  ({ key } = await api.store.createApiKey({ tenant: 'acme', principal: 'alice', scopes: ['runs:read'] }));
});

afterAll(async () => {
  await api?.close();
  await deletePrefixedKeys(redis, prefix);
  redis?.disconnect();
});

const LONG_ID = `run_${'a'.repeat(300)}`;

/** Spellings of real routes the router forgives, unknown paths, and requests the router cannot route. */
const SPELLINGS: Array<[method: string, target: string]> = [
  ['GET', '/v1/models'],
  ['GET', '/%761/models'],
  ['GET', 'http://x/v1/models'],
  ['GET', '//v1/models'],
  ['GET', '/v1//models'],
  ['GET', '/V1/MODELS'],
  ['GET', '/v1/models/'],
  ['HEAD', '/v1/models'],
  ['OPTIONS', '/v1/models'],
  ['DELETE', '/v1/models'],
  ['GET', '/v1/runs/run_missing'],
  ['GET', '/v1/nothing-here'],
  ['GET', '/'],
  ['GET', '/v1/runs/%ff'],
  ['GET', `/v1/runs/${LONG_ID}`],
  ['GET', '/%2e%2e/v1/models'],
  ['POST', '/v1/runs/run_x/cancel'],
];

describe('the API without a key', () => {
  it.each(SPELLINGS)('refuses %s %s with 401 in the one error shape', async (method, target) => {
    const answer = await rawRequest(api.url, method, target);
    expect(answer.status).toBe(401);
    expect(answer.headers['www-authenticate']).toBe('Bearer');
    if (method !== 'HEAD') {
      expect(isOneErrorShape(answer, 'unauthorized')).toBe(true);
      expect(answer.json.error.message).toBe('a valid API key is required (Authorization: Bearer <key>)');
    }
  });

  it('refuses a wrong key in every scheme alike', async () => {
    for (const authorization of [`Bearer ${key}x`, `Basic ${btoa('x:nope')}`, 'Bearer ', key]) {
      const answer = await rawRequest(api.url, 'GET', '/v1/nothing-here', { headers: { authorization } });
      expect(answer.status).toBe(401);
      expect(isOneErrorShape(answer, 'unauthorized')).toBe(true);
    }
  });

  it('keeps the dashboard behind its own gate, never public', async () => {
    for (const target of ['/admin/queues', '/%61dmin/queues', '/admin/queues/api/queues']) {
      const answer = await rawRequest(api.url, 'GET', target);
      expect(answer.status, target).toBe(401);
      expect(isOneErrorShape(answer, 'unauthorized')).toBe(true);
    }
  });

  it('answers health, readiness, metrics and the API document to anyone', async () => {
    for (const target of [
      '/healthz',
      '/readyz',
      '/metrics',
      '/docs',
      '/docs/json',
      '/docs/static/index.html',
    ]) {
      const answer = await rawRequest(api.url, 'GET', target);
      expect(answer.status, target).toBeLessThan(400);
    }
    const document = await rawRequest(api.url, 'GET', '/docs/json');
    expect(document.json.paths['/v1/models']).toBeDefined();
  });
});

describe('the API with a key', () => {
  const bearer = () => ({ authorization: `Bearer ${key}` });

  it('reaches the same route whatever the spelling, so the refusals above are real', async () => {
    for (const target of ['/v1/models', '/%761/models', 'http://x/v1/models']) {
      const answer = await rawRequest(api.url, 'GET', target, { headers: bearer() });
      expect(answer.status, target).toBe(200);
      expect(answer.json.models).toBeDefined();
    }
  });

  it('still checks each route scope: a runs:read key cannot cancel', async () => {
    const answer = await rawRequest(api.url, 'POST', '/%761/runs/run_0a1b2c3d/cancel', { headers: bearer() });
    expect(answer.status).toBe(401);
    expect(answer.json.error.message).toBe('this key lacks the runs:write scope');
  });

  it('tells a caller with a key that a path does not exist, and only then', async () => {
    const answer = await rawRequest(api.url, 'GET', '/v1/nothing-here', { headers: bearer() });
    expect(answer.status).toBe(404);
    expect(answer.json).toEqual({ error: { code: 'not_found', message: 'no route GET /v1/nothing-here' } });
  });
});
