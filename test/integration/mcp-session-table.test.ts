import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { McpSessionTable } from '../../apps/api/mcp/sessions.js';
import { McpSessionSlots, mcpSessionSlotKeys } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * The API process's MCP session table over the places counted in a real Redis: bounded here by
 * count and idle time, and per tenant and key across replicas by places it renews while a session
 * lives and gives back when it ends. Clocks are injected: no test waits out an idle period or a TTL.
 */
describe('the MCP session table', () => {
  const prefix = uniquePrefix('mcp-table');
  let redis: Redis;
  let nowMs = 1_800_000_000_000;
  const clock = () => nowMs;
  const tables: McpSessionTable[] = [];

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'producer', 'test-mcp-table');
  });

  afterAll(async () => {
    for (const table of tables) await table.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  function tableOf(options: { maxSessions: number; idleMs: number }, limits = { perTenant: 4, perKey: 2 }) {
    const places = new McpSessionSlots(redis, `${prefix}:`, { ...limits, ttlMs: 60_000 }, clock);
    const table = new McpSessionTable(options, places, clock);
    tables.push(table);
    return table;
  }

  /** Reserves and adds a session whose close is counted. */
  async function open(table: McpSessionTable, id: string, tenant: string, keyId: string, closed: string[]) {
    await table.reserve({ sessionId: id, tenant, keyId });
    table.add({ id, tenant, keyId, route: '/mcp', close: async () => void closed.push(id) });
  }

  it('finds a session only for the key and route that opened it', async () => {
    const table = tableOf({ maxSessions: 10, idleMs: 60_000 });
    await open(table, 'find-a', 'find', 'k1', []);
    expect(table.find('find-a', 'k2', '/mcp')).toBeUndefined();
    expect(table.find('find-a', 'k1', '/mcp/browser/ses_x')).toBeUndefined();
    expect(table.find('find-a', 'k1', '/mcp')?.id).toBe('find-a');
  });

  it("refuses a key's place past its bound, and a tenant's, with the wait until the soonest lapses", async () => {
    const table = tableOf({ maxSessions: 10, idleMs: 60_000 });
    await open(table, 'b1', 'bound', 'k1', []);
    await open(table, 'b2', 'bound', 'k1', []);
    await expect(table.reserve({ sessionId: 'b3', tenant: 'bound', keyId: 'k1' })).rejects.toMatchObject({
      code: 'rate_limited',
      retryAfterMs: 60_000,
      message: expect.stringMatching(/2 open MCP sessions per API key/),
    });
    await open(table, 'b4', 'bound', 'k2', []);
    await open(table, 'b5', 'bound', 'k2', []);
    nowMs += 10_000;
    await expect(table.reserve({ sessionId: 'b6', tenant: 'bound', keyId: 'k3' })).rejects.toMatchObject({
      code: 'rate_limited',
      retryAfterMs: 50_000,
      message: expect.stringMatching(/4 open MCP sessions per tenant/),
    });
    // Nothing was taken by a refusal.
    expect(await redis.zcard(mcpSessionSlotKeys(`${prefix}:`, 'bound', 'k3').key)).toBe(0);
    await open(table, 'other-1', 'elsewhere', 'k9', []);
  });

  it('gives a place back when its session idles out, never while a request is in flight', async () => {
    const table = tableOf({ maxSessions: 2, idleMs: 1_000 });
    const closed: string[] = [];
    await open(table, 'idle-a', 'idle', 'k1', closed);
    await open(table, 'idle-b', 'idle', 'k2', closed);
    await expect(table.reserve({ sessionId: 'idle-c', tenant: 'idle', keyId: 'k3' })).rejects.toMatchObject({
      code: 'unavailable',
    });
    const found = table.find('idle-b', 'k2', '/mcp');
    const done = found ? table.begin(found) : () => undefined;
    nowMs += 5_000;
    await table.sweep();
    expect(closed).toEqual(['idle-a']);
    expect(await redis.zrange(mcpSessionSlotKeys(`${prefix}:`, 'idle', 'k1').tenant, 0, -1)).toEqual([
      'idle-b',
    ]);
    done();
    nowMs += 5_000;
    await table.sweep();
    expect(closed).toEqual(['idle-a', 'idle-b']);
    expect(await redis.zcard(mcpSessionSlotKeys(`${prefix}:`, 'idle', 'k1').tenant)).toBe(0);
    await table.reserve({ sessionId: 'idle-c', tenant: 'idle', keyId: 'k3' });
  });

  it("renews the places of live sessions, while a dead replica's lapse", async () => {
    const limits = { perTenant: 2, perKey: 2 };
    const live = tableOf({ maxSessions: 10, idleMs: 3_600_000 }, limits);
    const dead = tableOf({ maxSessions: 10, idleMs: 3_600_000 }, limits);
    await open(live, 'live-1', 'renew', 'k1', []);
    await open(dead, 'dead-1', 'renew', 'k1', []);
    // 50 s on, the live replica renews; the dead one (stopped, its timers gone) does not.
    nowMs += 50_000;
    await live.renew();
    nowMs += 20_000;
    const { tenant } = mcpSessionSlotKeys(`${prefix}:`, 'renew', 'k1');
    await live.reserve({ sessionId: 'live-2', tenant: 'renew', keyId: 'k1' });
    expect((await redis.zrange(tenant, 0, -1)).sort()).toEqual(['live-1', 'live-2']);
    expect(Number(await redis.zscore(tenant, 'live-1'))).toBe(nowMs - 20_000 + 60_000);
  });

  it('gives back the place of a session that never opened', async () => {
    const table = tableOf({ maxSessions: 10, idleMs: 60_000 }, { perTenant: 1, perKey: 1 });
    await table.reserve({ sessionId: 'never', tenant: 'never', keyId: 'k1' });
    await table.abandon({ sessionId: 'never', tenant: 'never', keyId: 'k1' });
    await table.reserve({ sessionId: 'next', tenant: 'never', keyId: 'k1' });
  });
});
