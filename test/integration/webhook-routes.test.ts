import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { WEBHOOKS_PER_TENANT_MAX } from '../../libs/contracts/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const PRIVATE_URLS = [
  'http://127.0.0.1:9/hook',
  'http://localhost:9/hook',
  'http://[::1]:9/hook',
  'http://10.1.2.3/hook',
  'http://192.168.0.10/hook',
  'http://172.20.0.1/hook',
  'http://169.254.169.254/latest/meta-data/',
  'http://[::ffff:127.0.0.1]/hook',
  'http://[fd00:ec2::254]/hook',
  'http://0x7f.1/hook',
];

describe('REST v1 webhooks: registered by an admin, tenant-scoped, private addresses refused', () => {
  const prefix = uniquePrefix('webhook-routes');
  const openPrefix = uniquePrefix('webhook-routes-open');
  let api: ApiHandle;
  let openApi: ApiHandle;
  let adminA: string;
  let adminB: string;
  let reader: string;

  beforeAll(async () => {
    api = await startTestApi(prefix);
    openApi = await startTestApi(openPrefix, { LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true' });
    adminA = (await api.store.createApiKey({ tenant: 'wa', principal: 'root', scopes: ['admin'] })).key;
    adminB = (await api.store.createApiKey({ tenant: 'wb', principal: 'root', scopes: ['admin'] })).key;
    reader = (await api.store.createApiKey({ tenant: 'wa', principal: 'bob', scopes: ['runs:read'] })).key;
  });
  afterAll(async () => {
    await api.close();
    await openApi.close();
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-webhook-routes-cleanup');
    await deletePrefixedKeys(redis, prefix);
    await deletePrefixedKeys(redis, openPrefix);
    await closeRedis(redis);
  });

  const call = (base: ApiHandle, key: string, method: string, path: string, body?: unknown) =>
    fetch(`${base.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });

  it('refuses loopback, private, link-local and metadata URLs and other schemes', async () => {
    for (const url of [...PRIVATE_URLS, 'ftp://example.com/hook', 'file:///etc/passwd', 'not a url']) {
      const answer = await call(api, adminA, 'POST', '/v1/webhooks', { url });
      expect({ url, status: answer.status }).toEqual({ url, status: 422 });
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
    }
  });

  it('registers a private URL where LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE is on', async () => {
    const key = (await openApi.store.createApiKey({ tenant: 'wo', principal: 'root', scopes: ['admin'] }))
      .key;
    const answer = await call(openApi, key, 'POST', '/v1/webhooks', { url: 'http://127.0.0.1:9/hook' });
    expect(answer.status).toBe(201);
  });

  it("shows the secret once and keeps each tenant's webhooks, and their logs, to itself", async () => {
    const created = await call(api, adminA, 'POST', '/v1/webhooks', {
      url: 'https://93.184.215.14/hook',
      events: ['run.ended'],
    });
    expect(created.status).toBe(201);
    const hook = (await created.json()) as { id: string; secret: string; events: string[]; tenant: string };
    expect(hook.secret.length).toBeGreaterThanOrEqual(32);
    expect(hook).toMatchObject({ tenant: 'wa', events: ['run.ended'] });

    const listed = await (await call(api, adminA, 'GET', '/v1/webhooks')).text();
    expect(JSON.parse(listed).webhooks.map((entry: { id: string }) => entry.id)).toEqual([hook.id]);
    expect(listed).not.toContain(hook.secret);
    expect((await call(api, adminA, 'GET', `/v1/webhooks/${hook.id}/deliveries`)).status).toBe(200);

    expect(await (await call(api, adminB, 'GET', '/v1/webhooks')).json()).toEqual({ webhooks: [] });
    expect((await call(api, adminB, 'GET', `/v1/webhooks/${hook.id}/deliveries`)).status).toBe(404);
    expect((await call(api, adminB, 'DELETE', `/v1/webhooks/${hook.id}`)).status).toBe(404);
    expect((await call(api, reader, 'GET', '/v1/webhooks')).status).toBe(401);

    expect((await call(api, adminA, 'DELETE', `/v1/webhooks/${hook.id}`)).status).toBe(204);
    expect(await (await call(api, adminA, 'GET', '/v1/webhooks')).json()).toEqual({ webhooks: [] });
  });

  it(`holds a tenant to ${WEBHOOKS_PER_TENANT_MAX} webhooks`, async () => {
    const key = (await api.store.createApiKey({ tenant: 'wcap', principal: 'root', scopes: ['admin'] })).key;
    for (let index = 0; index < WEBHOOKS_PER_TENANT_MAX; index += 1)
      expect(
        (await call(api, key, 'POST', '/v1/webhooks', { url: `https://93.184.215.14/${index}` })).status,
      ).toBe(201);
    const over = await call(api, key, 'POST', '/v1/webhooks', { url: 'https://93.184.215.14/over' });
    expect(over.status).toBe(409);
  });

  it('lists the webhook routes in the OpenAPI document with their response schemas', async () => {
    const document = (await (await fetch(`${api.url}/docs/json`)).json()) as {
      paths: Record<string, Record<string, { responses: Record<string, unknown> }>>;
    };
    expect(document.paths['/v1/webhooks']?.post?.responses['201']).toBeDefined();
    expect(document.paths['/v1/webhooks']?.get?.responses['200']).toBeDefined();
    expect(document.paths['/v1/webhooks/{id}']?.delete).toBeDefined();
    expect(document.paths['/v1/webhooks/{id}/deliveries']?.get?.responses['200']).toBeDefined();
  });
});
