import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { storedValues } from '../fixtures/redis-values.js';

describe('the run store: API keys, agents and sessions', () => {
  const prefix = `${uniquePrefix('run-store-records')}:`;
  let redis: Redis;
  let store: RunStore;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-store-records');
    store = new RunStore(redis, prefix, () => 1_800_000_000_000);
  });
  afterAll(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length > 0) await redis.del(...keys);
    await closeRedis(redis);
  });

  it('resolves a created API key to its tenant, principal and scopes, and stores only its hash', async () => {
    const { key, identity } = await store.createApiKey({
      tenant: 'acme',
      principal: 'alice',
      scopes: ['runs:write', 'runs:read'],
    });
    expect(await store.resolveApiKey(key)).toEqual({
      key_id: identity.key_id,
      tenant: 'acme',
      principal: 'alice',
      scopes: ['runs:read', 'runs:write'],
    });
    const stored = await storedValues(redis, prefix);
    expect([...stored.keys(), ...stored.values()].join('\n')).not.toContain(key);
  });

  it('resolves no identity for a key it never issued', async () => {
    const { key } = await store.createApiKey({ tenant: 'acme', principal: 'alice', scopes: ['admin'] });
    expect(await store.resolveApiKey(`${key}x`)).toBeUndefined();
    expect(await store.resolveApiKey('lhk_unknown')).toBeUndefined();
    expect(await store.resolveApiKey('')).toBeUndefined();
  });

  it('refuses an API key with an unknown scope, naming the scope, and stores no key', async () => {
    const before = await store.listApiKeys('acme');
    await expect(
      store.createApiKey({ tenant: 'acme', principal: 'alice', scopes: ['runs:delete' as never] }),
    ).rejects.toMatchObject({
      name: 'ZodError',
      issues: [expect.objectContaining({ code: 'invalid_value', path: ['scopes', 0] })],
    });
    expect(await store.listApiKeys('acme')).toEqual(before);
  });

  it('addresses agent versions by content: same content gives the same version whatever its key order', async () => {
    const created = await store.putAgent('acme', {
      model: 'scripted',
      instructions: 'hello',
      tools: ['browser.observe'],
      metadata: { team: 'ops', browser_task_limits: true },
    });
    if (created.status === 'not_found') throw new Error('not created');
    expect(created.status).toBe('created');
    const again = await store.putAgent(
      'acme',
      {
        metadata: { browser_task_limits: true, team: 'ops' },
        tools: ['browser.observe'],
        instructions: 'hello',
        model: 'scripted',
      },
      created.agent.id,
    );
    expect(again).toMatchObject({ status: 'unchanged', version: created.version });

    const changed = await store.putAgent(
      'acme',
      { model: 'scripted', instructions: 'hello, again' },
      created.agent.id,
    );
    if (changed.status === 'not_found') throw new Error('not updated');
    expect(changed.status).toBe('updated');
    expect(changed.version).not.toBe(created.version);
    expect(changed.agent.latest_version).toBe(changed.version);

    // The first version is immutable and still readable.
    expect(await store.getAgentVersion('acme', created.agent.id, created.version)).toMatchObject({
      instructions: 'hello',
      metadata: { team: 'ops' },
    });
    expect(await store.getAgentVersion('acme', created.agent.id, changed.version)).toMatchObject({
      instructions: 'hello, again',
    });

    // Putting the first content again answers its original version.
    const back = await store.putAgent(
      'acme',
      {
        model: 'scripted',
        instructions: 'hello',
        tools: ['browser.observe'],
        metadata: { team: 'ops', browser_task_limits: true },
      },
      created.agent.id,
    );
    expect(back).toMatchObject({ status: 'updated', version: created.version });
  });

  it('keeps agents tenant-scoped', async () => {
    const created = await store.putAgent('acme', { model: 'scripted', instructions: 'mine' });
    if (created.status === 'not_found') throw new Error('not created');
    expect(await store.getAgent('other', created.agent.id)).toBeUndefined();
    expect(await store.getAgentVersion('other', created.agent.id, created.version)).toBeUndefined();
    expect(await store.putAgent('other', { model: 'x', instructions: 'steal' }, created.agent.id)).toEqual({
      status: 'not_found',
    });
    expect((await store.getAgent('acme', created.agent.id))?.latest_version).toBe(created.version);
  });

  it('refuses an agent definition that breaks its schema, naming the field', async () => {
    await expect(store.putAgent('acme', { model: '', instructions: 'x' })).rejects.toMatchObject({
      name: 'ZodError',
      issues: [expect.objectContaining({ code: 'too_small', path: ['model'] })],
    });
  });

  it('creates a session pinned to an agent version and a profile, and hides it from other tenants', async () => {
    const first = await store.putAgent('acme', { model: 'scripted', instructions: 'v1' });
    if (first.status === 'not_found') throw new Error('not created');
    const second = await store.putAgent('acme', { model: 'scripted', instructions: 'v2' }, first.agent.id);
    if (second.status === 'not_found') throw new Error('not updated');

    const pinned = await store.createSession({
      tenant: 'acme',
      principal: 'alice',
      agentId: first.agent.id,
      agentVersion: first.version,
      browserProfileId: 'shop',
    });
    expect(pinned).toMatchObject({
      agent_version: first.version,
      browser_profile_id: 'shop',
      tenant: 'acme',
    });
    const latest = await store.createSession({ tenant: 'acme', principal: 'alice', agentId: first.agent.id });
    expect(latest).toMatchObject({ agent_version: second.version, browser_profile_id: null });

    if (!pinned) throw new Error('no session');
    expect(await store.getSession('acme', pinned.id)).toEqual(pinned);
    expect(await store.getSession('other', pinned.id)).toBeUndefined();
    // A new version of the agent leaves the session's pin as it was.
    await store.putAgent('acme', { model: 'scripted', instructions: 'v3' }, first.agent.id);
    expect((await store.getSession('acme', pinned.id))?.agent_version).toBe(first.version);
  });

  it('refuses a session for an agent or version the tenant does not have', async () => {
    const agent = await store.putAgent('acme', { model: 'scripted', instructions: 'x' });
    if (agent.status === 'not_found') throw new Error('not created');
    expect(
      await store.createSession({ tenant: 'other', principal: 'bob', agentId: agent.agent.id }),
    ).toBeUndefined();
    expect(
      await store.createSession({
        tenant: 'acme',
        principal: 'alice',
        agentId: agent.agent.id,
        agentVersion: 'f'.repeat(64),
      }),
    ).toBeUndefined();
    expect(
      await store.createSession({ tenant: 'acme', principal: 'alice', agentId: 'agt_missing00' }),
    ).toBeUndefined();
  });
});
