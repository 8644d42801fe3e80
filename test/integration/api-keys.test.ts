import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiHandle, startApi } from '../../apps/api/server.js';
import { loadConfig } from '../../libs/config/index.js';
import { sha256Hex } from '../../libs/contracts/index.js';
import { RunStore } from '../../libs/store/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Every key name of this prefix and every value it holds, as one text. */
async function storedText(redis: Redis, prefix: string): Promise<string> {
  const values = await storedValues(redis, prefix);
  return [...values.keys(), ...values.values()].join('\n');
}

describe('the run store: listing and revoking API keys', () => {
  const prefix = uniquePrefix('api-keys-store');
  let redis: Redis;
  let store: RunStore;
  let now = 1_800_000_000_000;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-api-keys-store');
    store = new RunStore(redis, `${prefix}:`, () => now);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  it("lists a tenant's keys oldest first, without their secrets or hashes, and none of another tenant's", async () => {
    const first = await store.createApiKey({ tenant: 'list', principal: 'alice', scopes: ['runs:read'] });
    now += 1_000;
    const second = await store.createApiKey({
      tenant: 'list',
      principal: 'ops@list',
      scopes: ['runs:write', 'admin'],
    });
    await store.createApiKey({ tenant: 'list-other', principal: 'eve', scopes: ['admin'] });

    const listed = await store.listApiKeys('list');
    expect(listed).toEqual([
      { ...first.identity, created_at_ms: now - 1_000, created_by: null },
      { ...second.identity, scopes: ['admin', 'runs:write'], created_at_ms: now, created_by: null },
    ]);
    const text = JSON.stringify(listed);
    for (const { key } of [first, second]) {
      expect(text).not.toContain(key);
      expect(text).not.toContain(sha256Hex(key));
    }
    expect(await storedText(redis, prefix)).not.toContain(first.key);
  });

  it('revokes a key: it then resolves to no identity and is no longer listed', async () => {
    const kept = await store.createApiKey({ tenant: 'revoke', principal: 'alice', scopes: ['admin'] });
    const revoked = await store.createApiKey({ tenant: 'revoke', principal: 'bob', scopes: ['runs:read'] });

    expect(await store.revokeApiKey('revoke', revoked.identity.key_id)).toBe(true);
    expect(await store.resolveApiKey(revoked.key)).toBeUndefined();
    expect((await store.listApiKeys('revoke')).map((view) => view.key_id)).toEqual([kept.identity.key_id]);
    expect(await store.resolveApiKey(kept.key)).toEqual(kept.identity);
    // A second revocation finds nothing.
    expect(await store.revokeApiKey('revoke', revoked.identity.key_id)).toBe(false);
  });

  it("refuses to revoke another tenant's key or an id it never issued", async () => {
    const theirs = await store.createApiKey({ tenant: 'theirs', principal: 'eve', scopes: ['admin'] });
    expect(await store.revokeApiKey('mine', theirs.identity.key_id)).toBe(false);
    expect(await store.revokeApiKey('mine', 'key_neverissued000000000')).toBe(false);
    expect(await store.revokeApiKey('mine', 'not an id')).toBe(false);
    expect(await store.resolveApiKey(theirs.key)).toEqual(theirs.identity);
  });

  it('makes a key only with scopes its maker holds, admin holding every tenant scope, and writes nothing else', async () => {
    const writer = await store.createApiKey({
      tenant: 'held',
      principal: 'w',
      scopes: ['runs:read', 'runs:write'],
    });
    const refused = await store.createApiKeyBy(
      writer.identity,
      { principal: 'w', scopes: ['runs:read', 'approvals:write', 'admin'] },
      100,
    );
    expect(refused).toEqual({ ok: false, code: 'scopes_not_held', scopes: ['approvals:write', 'admin'] });
    expect((await store.listApiKeys('held')).map((view) => view.key_id)).toEqual([writer.identity.key_id]);

    const admin = await store.createApiKey({ tenant: 'held', principal: 'ops', scopes: ['admin'] });
    const made = await store.createApiKeyBy(
      admin.identity,
      { principal: 'bot', scopes: ['approvals:any', 'approvals:write', 'runs:read'] },
      100,
    );
    expect(made).toMatchObject({ ok: true, identity: { tenant: 'held' }, createdBy: admin.identity.key_id });
    // Never the fleet's operator scope, whatever the maker holds.
    expect(
      await store.createApiKeyBy(admin.identity, { principal: 'bot', scopes: ['operator'] }, 100),
    ).toMatchObject({ ok: false, code: 'scopes_not_held' });
  });

  it("keeps each key's whole creation chain, through a revoked link, and bounds its depth", async () => {
    const root = await store.createApiKey({ tenant: 'chain', principal: 'ops', scopes: ['admin'] });
    expect(await store.apiKeyLineage('chain', root.identity.key_id)).toEqual({
      keyId: root.identity.key_id,
      makers: [],
    });
    let maker = root;
    const makers: string[] = [];
    for (let depth = 1; depth <= 16; depth += 1) {
      const made = await store.createApiKeyBy(maker.identity, { principal: 'ops', scopes: ['admin'] }, 100);
      if (!made.ok) throw new Error(`depth ${depth}: ${made.code}`);
      makers.push(maker.identity.key_id);
      maker = made;
    }
    // The middle of the chain goes; the last key's chain still names it.
    expect(await store.revokeApiKey('chain', makers[8] as string)).toBe(true);
    expect(await store.apiKeyLineage('chain', maker.identity.key_id)).toEqual({
      keyId: maker.identity.key_id,
      makers,
    });
    expect(
      await store.createApiKeyBy(maker.identity, { principal: 'ops', scopes: ['runs:read'] }, 100),
    ).toEqual({
      ok: false,
      code: 'chain_too_deep',
      max: 16,
    });
    // A revoked maker makes nothing; another tenant's key is no key of this one.
    const revoked = await store.createApiKey({ tenant: 'chain', principal: 'x', scopes: ['admin'] });
    await store.revokeApiKey('chain', revoked.identity.key_id);
    expect(
      await store.createApiKeyBy(revoked.identity, { principal: 'x', scopes: ['runs:read'] }, 100),
    ).toEqual({ ok: false, code: 'maker_gone' });
    expect(await store.apiKeyLineage('chain-other', root.identity.key_id)).toBeUndefined();
  });

  it('lists no key whose record is gone (an index entry written before a record that never came)', async () => {
    const { key, identity } = await store.createApiKey({
      tenant: 'torn',
      principal: 'alice',
      scopes: ['runs:read'],
    });
    await redis.del(`${prefix}:apikey:${sha256Hex(key)}`);
    expect(await store.listApiKeys('torn')).toEqual([]);
    expect(await store.revokeApiKey('torn', identity.key_id)).toBe(false);
  });
});

describe('the api-key CLI', () => {
  const prefix = uniquePrefix('api-keys-cli');
  let redis: Redis;
  let store: RunStore;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-api-keys-cli');
    store = new RunStore(redis, `${prefix}:`);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  function runCli(
    args: string[],
    env: Record<string, string> = {},
  ): Promise<{ code: number; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      // The script as `npm run api-key` runs it, with tsx as a loader of this one process: the
      // tsx command would start a second node process for each call (seconds on a loaded machine).
      execFile(
        process.execPath,
        ['--import', 'tsx', 'scripts/create-api-key.ts', ...args],
        {
          cwd: ROOT,
          env: { ...process.env, REDIS_URL: testRedisUrl(), LEASEHOLD_KEY_PREFIX: `${prefix}:`, ...env },
          timeout: 20_000,
        },
        (error, stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stdout, stderr }),
      );
    });
  }

  it('issues a key for the tenant, principal and scopes it is given, printing the key once and its id', async () => {
    const result = await runCli([
      '--tenant',
      'acme',
      '--principal',
      'ops@acme',
      '--scopes',
      'admin,runs:write,runs:read,approvals:write',
    ]);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const key = /^key:\s+(lhk_\S+)$/m.exec(result.stdout)?.[1];
    const keyId = /^key_id:\s+(key_\S+)$/m.exec(result.stdout)?.[1];
    expect(key).toBeDefined();
    expect(result.stdout.split(key as string)).toHaveLength(2);

    expect(await store.resolveApiKey(key as string)).toEqual({
      key_id: keyId,
      tenant: 'acme',
      principal: 'ops@acme',
      scopes: ['admin', 'approvals:write', 'runs:read', 'runs:write'],
    });
    // Made by the operator, not by a key: it heads a creation chain of its own.
    expect((await store.listApiKeys('acme')).map((view) => [view.key_id, view.created_by])).toEqual([
      [keyId, null],
    ]);
    expect(result.stdout).toContain('made by no key');
  });

  it.each([
    [['--tenant', 'acme', '--principal', 'ops', '--scopes', 'admin,runs:delete'], /--scopes/],
    [['--principal', 'ops', '--scopes', 'admin'], /--tenant/],
    [['--tenant', 'ac me', '--principal', 'ops', '--scopes', 'admin'], /--tenant/],
    [['--tenant', 'acme', '--principal', 'o/ps', '--scopes', 'admin'], /--principal/],
    [['--tenant', 'acme', '--principal', 'ops', '--scopes', ''], /--scopes/],
    [['--tenant', 'acme', '--principal', 'ops', '--scopes', 'admin', '--tennant', 'x'], /--tennant/],
  ])('refuses bad input %j with one line and exit code 2, issuing nothing', async (args, named) => {
    const before = (await redis.keys(`${prefix}:*`)).sort();
    const result = await runCli(args);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(named);
    expect((await redis.keys(`${prefix}:*`)).sort()).toEqual(before);
  });

  it('says in one line which setting is wrong and exits 1', async () => {
    const result = await runCli(['--tenant', 'acme', '--principal', 'ops', '--scopes', 'admin'], {
      LEASEHOLD_KEY_PREFIX: 'bad prefix',
    });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('LEASEHOLD_KEY_PREFIX');
  });

  it('says in one line that Redis does not answer and exits 1', async () => {
    const result = await runCli(['--tenant', 'acme', '--principal', 'ops', '--scopes', 'admin'], {
      REDIS_URL: 'redis://127.0.0.1:1',
    });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('redis://127.0.0.1:1 did not answer');
  });
});

describe('REST: /v1/api-keys (admin scope)', () => {
  const prefix = uniquePrefix('api-keys-rest');
  let api: ApiHandle;
  let redis: Redis;
  let adminKey: string;
  let base: string;

  beforeAll(async () => {
    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      PORT: '0',
      LOG_LEVEL: 'silent',
    });
    api = await startApi({
      config,
      logger: silentLogger(),
      metrics: createMetrics({ role: 'api' }),
      redisUrl: testRedisUrl(),
    });
    base = api.url;
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-api-keys-rest');
    adminKey = (await api.store.createApiKey({ tenant: 'acme', principal: 'root', scopes: ['admin'] })).key;
  });
  afterAll(async () => {
    await api?.close();
    if (redis) {
      await deletePrefixedKeys(redis, prefix);
      await closeRedis(redis);
    }
  });

  async function call(method: string, path: string, key: string, body?: unknown) {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${key}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  }

  it("creates a key in the caller's own tenant, shows it once, and the key works for its scopes", async () => {
    const created = await call('POST', '/v1/api-keys', adminKey, {
      principal: 'bot@acme',
      scopes: ['runs:read', 'runs:write'],
    });
    expect(created.status).toBe(201);
    expect(created.body).toEqual({
      key: expect.stringMatching(/^lhk_/),
      key_id: expect.stringMatching(/^key_/),
      tenant: 'acme',
      principal: 'bot@acme',
      scopes: ['runs:read', 'runs:write'],
      created_by: (await api.store.resolveApiKey(adminKey))?.key_id,
    });
    expect((await call('GET', '/v1/approvals', created.body.key)).status).toBe(200);
    // Not an admin: it may not manage keys.
    const refused = await call('GET', '/v1/api-keys', created.body.key);
    expect(refused.status).toBe(401);
    expect(refused.body.error.code).toBe('unauthorized');
  });

  it('refuses a body naming a tenant, an unknown scope or no scope (422)', async () => {
    for (const body of [
      { principal: 'x', scopes: ['admin'], tenant: 'other' },
      { principal: 'x', scopes: ['runs:delete'] },
      { principal: 'x', scopes: [] },
      { scopes: ['admin'] },
    ]) {
      const refused = await call('POST', '/v1/api-keys', adminKey, body);
      expect(refused.status, JSON.stringify(body)).toBe(422);
      expect(refused.body.error.code).toBe('validation_failed');
    }
  });

  it("lists the tenant's keys without secrets or hashes", async () => {
    const created = await call('POST', '/v1/api-keys', adminKey, {
      principal: 'lister',
      scopes: ['runs:read'],
    });
    await api.store.createApiKey({ tenant: 'globex', principal: 'eve', scopes: ['admin'] });
    const listed = await call('GET', '/v1/api-keys', adminKey);
    expect(listed.status).toBe(200);
    expect(listed.body.api_keys.every((view: { tenant: string }) => view.tenant === 'acme')).toBe(true);
    expect(listed.body.api_keys).toContainEqual({
      key_id: created.body.key_id,
      tenant: 'acme',
      principal: 'lister',
      scopes: ['runs:read'],
      created_at_ms: expect.any(Number),
      created_by: expect.stringMatching(/^key_/),
    });
    const text = JSON.stringify(listed.body);
    expect(text).not.toContain(created.body.key);
    expect(text).not.toContain(sha256Hex(created.body.key));
    expect(text).not.toContain(adminKey);
  });

  it('revokes a key: it then answers 401, and is gone from the list', async () => {
    const created = await call('POST', '/v1/api-keys', adminKey, {
      principal: 'leaver',
      scopes: ['runs:read'],
    });
    expect((await call('GET', '/v1/approvals', created.body.key)).status).toBe(200);

    const revoked = await call('DELETE', `/v1/api-keys/${created.body.key_id}`, adminKey);
    expect(revoked.status).toBe(204);
    const after = await call('GET', '/v1/approvals', created.body.key);
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('unauthorized');
    const listed = await call('GET', '/v1/api-keys', adminKey);
    expect(listed.body.api_keys.map((view: { key_id: string }) => view.key_id)).not.toContain(
      created.body.key_id,
    );
    const again = await call('DELETE', `/v1/api-keys/${created.body.key_id}`, adminKey);
    expect(again.status).toBe(404);
  });

  it("answers 404 for another tenant's key id, and leaves that key working", async () => {
    const theirs = await api.store.createApiKey({ tenant: 'initech', principal: 'bill', scopes: ['admin'] });
    const refused = await call('DELETE', `/v1/api-keys/${theirs.identity.key_id}`, adminKey);
    expect(refused.status).toBe(404);
    expect(refused.body).toEqual({
      error: { code: 'not_found', message: `API key ${theirs.identity.key_id} not found` },
    });
    expect((await call('GET', '/v1/api-keys', theirs.key)).status).toBe(200);
  });

  it('needs an admin key for every route (401 without one)', async () => {
    const reader = await api.store.createApiKey({ tenant: 'acme', principal: 'r', scopes: ['runs:read'] });
    for (const [method, path, body] of [
      ['POST', '/v1/api-keys', { principal: 'x', scopes: ['admin'] }],
      ['GET', '/v1/api-keys', undefined],
      ['DELETE', `/v1/api-keys/${reader.identity.key_id}`, undefined],
    ] as const) {
      expect((await call(method, path, reader.key, body)).status, `${method} ${path}`).toBe(401);
      expect((await call(method, path, 'lhk_wrong', body)).status, `${method} ${path}`).toBe(401);
    }
    expect(await api.store.resolveApiKey(reader.key)).toEqual(reader.identity);
  });

  it('shows the routes in the OpenAPI document under the api-keys tag', async () => {
    const response = await fetch(`${base}/docs/json`);
    const document = (await response.json()) as {
      paths: Record<string, Record<string, { tags?: string[] }>>;
    };
    expect(document.paths['/v1/api-keys']?.post?.tags).toEqual(['api-keys']);
    expect(document.paths['/v1/api-keys']?.get?.tags).toEqual(['api-keys']);
    expect(document.paths['/v1/api-keys/{id}']?.delete?.tags).toEqual(['api-keys']);
  });
});
