import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLeaseStore } from '../../libs/store/index.js';
import { monitorRedis } from '../fixtures/redis.js';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * Over REST: profile ids are unique within their tenant, so one tenant can
 * neither squat nor detect another's id, and listing reads the caller's tenant's index alone.
 */
describe('profiles scoped to their tenant (REST)', () => {
  let rig: ApiRig;
  let keyA: string;
  let keyB: string;
  let keyC: string;

  beforeAll(async () => {
    rig = await startApiRig('tenancy-rest');
    keyA = await rig.key('tenant-a', 'alice', ['admin', 'runs:read', 'runs:write']);
    keyB = await rig.key('tenant-b', 'bob', ['admin', 'runs:read', 'runs:write']);
    keyC = await rig.key('tenant-c', 'carol', ['admin', 'runs:read', 'runs:write']);
  });
  afterAll(async () => {
    await rig?.close();
  });

  it('lets two tenants each create a profile named shop, and shows each only its own', async () => {
    const createdA = await rig.call('POST', '/v1/profiles', {
      key: keyA,
      body: { id: 'shop', allowed_origins: ['https://a.example'] },
    });
    const createdB = await rig.call('POST', '/v1/profiles', {
      key: keyB,
      body: {
        id: 'shop',
        allowed_origins: ['https://b.example'],
        frame_origins: ['https://pay.example'],
        subresources: 'allowed_origins',
      },
    });
    expect(createdA.status).toBe(201);
    expect(createdB.status).toBe(201);
    // The same id again in the same tenant is the one conflict.
    const again = await rig.call('POST', '/v1/profiles', {
      key: keyB,
      body: { id: 'shop', allowed_origins: ['https://b.example'] },
    });
    expect(again.status).toBe(409);

    const listA = await rig.call('GET', '/v1/profiles', { key: keyA });
    const listB = await rig.call('GET', '/v1/profiles', { key: keyB });
    expect(listA.body.profiles).toEqual([
      {
        id: 'shop',
        allowed_origins: ['https://a.example'],
        frame_origins: [],
        subresources: 'any',
        protected: false,
        sealed: false,
        seal_fault: null,
        last_signed_in: null,
      },
    ]);
    expect(listB.body.profiles).toEqual([
      {
        id: 'shop',
        allowed_origins: ['https://b.example'],
        frame_origins: ['https://pay.example'],
        subresources: 'allowed_origins',
        protected: false,
        sealed: false,
        seal_fault: null,
        last_signed_in: null,
      },
    ]);
    expect((await rig.call('GET', '/v1/profiles', { key: keyC })).body.profiles).toEqual([]);

    const getB = await rig.call('GET', '/v1/profiles/shop', { key: keyB });
    expect(getB.status).toBe(200);
    expect(getB.body.allowed_origins).toEqual(['https://b.example']);
    expect((await rig.call('GET', '/v1/profiles/shop', { key: keyC })).status).toBe(404);
  });

  it("binds a session's browser_profile_id to the caller's own tenant's profile", async () => {
    await rig.call('POST', '/v1/profiles', {
      key: keyA,
      body: { id: 'only-a', allowed_origins: ['https://a.example'] },
    });
    const own = await rig.call('POST', '/v1/sessions', { key: keyA, body: { browser_profile_id: 'only-a' } });
    expect(own.status).toBe(201);
    expect(own.body.browser_profile_id).toBe('only-a');
    // Tenant C has no profile of that id: another tenant's is not found, never borrowed.
    const other = await rig.call('POST', '/v1/sessions', {
      key: keyC,
      body: { browser_profile_id: 'only-a' },
    });
    expect(other.status).toBe(404);
    expect(other.body.error.code).toBe('not_found');
  });

  it('normalises frame_origins like allowed_origins and refuses what is not an http(s) origin', async () => {
    const created = await rig.call('POST', '/v1/profiles', {
      key: keyC,
      body: {
        id: 'embeds',
        allowed_origins: ['https://c.example'],
        frame_origins: ['HTTPS://Pay.Example:443', 'https://pay.example', 'http://login.example:8080'],
      },
    });
    expect(created.status).toBe(201);
    expect(created.body.frame_origins).toEqual(['http://login.example:8080', 'https://pay.example']);
    expect(created.body.subresources).toBe('any');
    for (const body of [
      { id: 'bad-1', allowed_origins: ['https://c.example'], frame_origins: ['javascript:alert(1)'] },
      { id: 'bad-2', allowed_origins: ['https://c.example'], frame_origins: ['https://c.example/path'] },
      { id: 'bad-3', allowed_origins: ['https://c.example'], subresources: 'none' },
      {
        id: 'bad-4',
        allowed_origins: ['https://c.example'],
        frame_origins: Array.from({ length: 65 }, (_, n) => `https://f${n}.example`),
      },
    ]) {
      const refused = await rig.call('POST', '/v1/profiles', { key: keyC, body });
      expect(refused.status, JSON.stringify(body).slice(0, 80)).toBeGreaterThanOrEqual(400);
      expect(refused.status).toBeLessThan(500);
    }
    const ids = (await rig.call('GET', '/v1/profiles', { key: keyC })).body.profiles.map(
      (profile: { id: string }) => profile.id,
    );
    expect(ids).toEqual(['embeds']);
  });

  it("lists one tenant's profiles reading only that tenant's keys, whatever another tenant has", async () => {
    // Tenant B makes 3,000 more profiles, each with sealed state, straight in the store.
    const store = new RedisLeaseStore(rig.redis, `${rig.prefix}:`);
    const now = Date.now();
    const bulk = Array.from({ length: 3_000 }, (_, n) =>
      store.createProfile(
        {
          id: `bulk-${n}`,
          tenant: 'tenant-b',
          principal: 'bob',
          allowed_origins: ['https://b.example'],
          frame_origins: [],
          subresources: 'any',
          protected: false,
        },
        now,
      ),
    );
    await Promise.all(bulk);
    // A sealed blob on tenant A's own profile too: listing never reads it.
    const sealed = 'v1.'.padEnd(200_000, 'x');
    const sealedKeys = await rig.redis.keys(`${rig.prefix}:{prf:*`);
    const profileKeys = sealedKeys.filter((key) => key.endsWith(':profile'));
    expect(profileKeys.length).toBeGreaterThan(3_000);
    const seal = rig.redis.pipeline();
    for (const key of profileKeys) seal.hset(key, 'sealed', sealed.slice(0, 64), 'sealed_at', now);
    await seal.exec();
    await rig.redis.hset(`${rig.prefix}:{prf:tenant-a/shop}:profile`, 'sealed', sealed);

    const seen: string[][] = [];
    const marker = `listing-done-${rig.prefix}`;
    let markerSeen = false;
    const monitor = await monitorRedis((args) => {
      if (args.includes(marker)) markerSeen = true;
      else if (args.some((arg) => arg.startsWith(`${rig.prefix}:`))) seen.push(args);
    });
    try {
      // monitorRedis returns once MONITOR is live, so every command of the listing is reported.
      const listed = await rig.call('GET', '/v1/profiles', { key: keyA });
      // MONITOR reports commands in the order the server runs them: once it reports an ECHO sent
      // after the listing's answer, it has reported every command the listing ran.
      await rig.redis.echo(marker);
      await expect.poll(() => markerSeen).toBe(true);
      expect(listed.status).toBe(200);
      expect(listed.body.profiles.map((profile: { id: string }) => profile.id)).toEqual(['only-a', 'shop']);
      expect(listed.body.profiles.find((p: { id: string }) => p.id === 'shop').sealed).toBe(true);
    } finally {
      await monitor.stop();
    }
    // What the listing touched (the API key's own lookups aside): tenant A's index and profiles.
    const profileCommands = seen.filter((args) => args.some((arg) => /profile/.test(arg)));
    const keysTouched = new Set(
      profileCommands.flatMap((args) => args.filter((arg) => arg.startsWith(`${rig.prefix}:`))),
    );
    expect([...keysTouched].sort()).toEqual([
      `${rig.prefix}:tenant:tenant-a:profiles`,
      `${rig.prefix}:{prf:tenant-a/only-a}:profile`,
      `${rig.prefix}:{prf:tenant-a/shop}:profile`,
    ]);
    expect(profileCommands.length).toBeLessThanOrEqual(3);
    // No whole-hash read and no read of the sealed field: the seal never leaves Redis for a list.
    for (const args of profileCommands) {
      expect(args[0]?.toLowerCase()).not.toBe('hgetall');
      expect(args.map((arg) => arg.toLowerCase())).not.toContain('sealed');
    }
  });
});
