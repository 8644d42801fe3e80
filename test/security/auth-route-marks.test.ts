import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiKeyDoors, authenticate } from '../../apps/api/auth.js';
import { RunStore } from '../../libs/store/index.js';
import {
  createHttpServer,
  FailedAuthLimiter,
  guardDoors,
  markDoor,
  PUBLIC_ROUTE,
} from '../../libs/telemetry/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * A route is public only by an explicit mark, and a route that is neither public nor
 * authenticated cannot be added — the server refuses to start and names it.
 */
const prefix = uniquePrefix('auth-marks');
let redis: Redis;
let store: RunStore;

beforeAll(() => {
  redis = new Redis(testRedisUrl());
  store = new RunStore(redis, `${prefix}:`);
});

afterAll(async () => {
  await deletePrefixedKeys(redis, prefix);
  redis.disconnect();
});

function apiLikeServer() {
  const app = createHttpServer(silentLogger(), 'test');
  guardDoors(app, apiKeyDoors(store, new FailedAuthLimiter(redis, `${prefix}:`, 20)));
  return app;
}

describe('route marks', () => {
  it('refuses to start a server with a route that has no credential and no public mark', async () => {
    const app = createHttpServer(silentLogger(), 'test');
    app.get('/healthz', { config: PUBLIC_ROUTE }, async () => ({ status: 'ok' }));
    app.get('/v1/secrets', async () => ({ secret: 'x' }));
    await expect(app.ready()).rejects.toThrow(
      'routes neither marked public nor authenticated: GET /v1/secrets; HEAD /v1/secrets',
    );
    await app.close();
  });

  it('refuses to start the API with a route that checks no scope, even behind its key', async () => {
    const app = apiLikeServer();
    app.get('/v1/anything', async () => ({ ok: true }));
    await expect(app.ready()).rejects.toThrow('GET /v1/anything');
    await app.close();
  });

  it('starts with routes that name their scope, are marked public, or check a credential of their own', async () => {
    const app = apiLikeServer();
    app.get('/v1/runs', { preHandler: authenticate(store, 'runs:read') }, async () => ({ runs: [] }));
    app.get('/v1/runs/:id', { preHandler: [authenticate(store, 'runs:read')] }, async () => ({}));
    app.get('/healthz', { config: PUBLIC_ROUTE }, async () => ({ status: 'ok' }));
    await app.register(async (pages) => {
      markDoor(pages, 'own');
      pages.get('/pages/approve', async () => 'a page with its own sign-in');
    });
    await app.register(async (docs) => {
      markDoor(docs, 'public');
      docs.get('/docs/json', async () => ({}));
    });
    await expect(app.ready()).resolves.toBeDefined();
    await app.close();
  });

  it('answers an "own" route without the server credential (its own gate decides)', async () => {
    const app = apiLikeServer();
    await app.register(async (pages) => {
      markDoor(pages, 'own');
      pages.get('/pages/approve', async (_request, reply) =>
        reply.code(401).send({ error: { code: 'unauthorized', message: 'sign in' } }),
      );
    });
    app.get('/v1/runs', { preHandler: authenticate(store, 'runs:read') }, async () => ({ runs: [] }));
    const own = await app.inject({ method: 'GET', url: '/pages/approve' });
    expect(own.json()).toEqual({ error: { code: 'unauthorized', message: 'sign in' } });
    const guarded = await app.inject({ method: 'GET', url: '/v1/runs' });
    expect(guarded.json().error.message).toBe('a valid API key is required (Authorization: Bearer <key>)');
    await app.close();
  });
});
