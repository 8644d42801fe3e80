import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mcpSessionSlotKeys } from '../../libs/store/index.js';
import { type ApiRig, startApiRig } from './api-rig.js';

const INITIALIZE = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'limits', version: '1' } },
});
const MCP_ACCEPT = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };

interface Initialized {
  status: number;
  sessionId: string | null;
  retryAfter: string | null;
  // biome-ignore lint/suspicious/noExplicitAny: a REST error or an MCP answer, read field by field.
  body: any;
}

async function initialize(rig: ApiRig, key: string): Promise<Initialized> {
  const response = await fetch(`${rig.api.url}/mcp`, {
    method: 'POST',
    headers: { ...MCP_ACCEPT, authorization: `Bearer ${key}` },
    body: INITIALIZE,
    signal: AbortSignal.timeout(10_000),
  });
  const text = await response.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    // An MCP answer as a Server-Sent Event.
  }
  return {
    status: response.status,
    sessionId: response.headers.get('mcp-session-id'),
    retryAfter: response.headers.get('retry-after'),
    body,
  };
}

async function end(rig: ApiRig, key: string, sessionId: string): Promise<number> {
  const response = await fetch(`${rig.api.url}/mcp`, {
    method: 'DELETE',
    headers: { ...MCP_ACCEPT, authorization: `Bearer ${key}`, 'mcp-session-id': sessionId },
  });
  await response.text();
  return response.status;
}

function expectRateLimited(answer: Initialized, what: RegExp): void {
  expect(answer.status).toBe(429);
  expect(answer.sessionId).toBeNull();
  expect(answer.body).toEqual({ error: { code: 'rate_limited', message: expect.stringMatching(what) } });
  const retryAfterS = Number(answer.retryAfter);
  expect(retryAfterS).toBeGreaterThanOrEqual(1);
  expect(retryAfterS).toBeLessThanOrEqual(15 * 60);
}

/**
 * One tenant could hold every MCP session of an API process: 64 keys × 16 initializes filled its
 * 1,000, and every other tenant's initialize answered 503. MCP sessions are now bounded per tenant
 * (64) and per key (16), counted in Redis across replicas, 429 `rate_limited` with Retry-After
 * past either; a session that ends frees its place, and a place nobody renews lapses.
 */
describe('MCP sessions per tenant and per key', { timeout: 120_000 }, () => {
  let replicaA: ApiRig;
  let replicaB: ApiRig;
  const keys: string[] = [];
  let otherTenantKey: string;
  const opened = new Map<string, string[]>();

  beforeAll(async () => {
    replicaA = await startApiRig('mcp-limits');
    replicaB = await startApiRig('mcp-limits-b', {}, replicaA.prefix);
    for (let index = 0; index < 6; index += 1)
      keys.push(await replicaA.key('crowd', `p${index}`, ['runs:read']));
    otherTenantKey = await replicaA.key('quiet', 'q', ['runs:read']);
  });

  afterAll(async () => {
    await replicaB?.close();
    await replicaA?.close();
  });

  async function openMany(key: string, count: number): Promise<void> {
    const ids = opened.get(key) ?? [];
    for (let index = 0; index < count; index += 1) {
      // Alternating replicas: the count is the fleet's, not a process's.
      const answer = await initialize(index % 2 === 0 ? replicaA : replicaB, key);
      expect(answer.status, `session ${ids.length + 1}`).toBe(200);
      expect(answer.sessionId).toBeTruthy();
      ids.push(answer.sessionId as string);
    }
    opened.set(key, ids);
  }

  it("refuses a key's 17th session, on either replica, with 429 and Retry-After", async () => {
    await openMany(keys[0] as string, 16);
    expectRateLimited(await initialize(replicaA, keys[0] as string), /16 open MCP sessions per API key/);
    expectRateLimited(await initialize(replicaB, keys[0] as string), /16 open MCP sessions per API key/);
  });

  it("refuses a tenant's 65th session while another tenant still opens one", async () => {
    for (const key of keys.slice(1, 4)) await openMany(key, 16);
    expectRateLimited(await initialize(replicaA, keys[4] as string), /64 open MCP sessions per tenant/);
    const other = await initialize(replicaB, otherTenantKey);
    expect(other.status).toBe(200);
    expect(other.sessionId).toBeTruthy();
  });

  it('frees the place of a session that ends', async () => {
    // The first was opened on replica A, which alone holds it (sessions are sticky); its place
    // is given back for the fleet, and replica B may open the next.
    const [first] = opened.get(keys[0] as string) ?? [];
    expect(await end(replicaA, keys[0] as string, first as string)).toBe(200);
    const again = await initialize(replicaB, keys[0] as string);
    expect(again.status).toBe(200);
    expectRateLimited(await initialize(replicaA, keys[4] as string), /per tenant/);
  });

  it('keeps each place as an expiring entry, so a replica that died without ending its sessions frees them', async () => {
    const { tenant, key } = mcpSessionSlotKeys(`${replicaA.prefix}:`, 'crowd', 'key-id-of-a-dead-replica');
    const nowMs = Date.now();
    const scores = await replicaA.redis.zrange(tenant, 0, -1, 'WITHSCORES');
    // Every live place expires within the renewal's reach, and the set itself expires.
    for (let index = 1; index < scores.length; index += 2) {
      expect(Number(scores[index])).toBeGreaterThan(nowMs);
      expect(Number(scores[index])).toBeLessThanOrEqual(nowMs + 5 * 60_000);
    }
    expect(await replicaA.redis.pttl(tenant)).toBeGreaterThan(0);
    // A dead replica's places, past their expiry: they count for nothing.
    const fifth = keys[5] as string;
    const fifthId = (await replicaA.api.store.resolveApiKey(fifth))?.key_id as string;
    const fifthSet = mcpSessionSlotKeys(`${replicaA.prefix}:`, 'crowd', fifthId).key;
    await replicaA.redis.del(tenant);
    for (let index = 0; index < 64; index += 1) {
      await replicaA.redis.zadd(tenant, nowMs - 1, `dead-${index}`);
      await replicaA.redis.zadd(fifthSet, nowMs - 1, `dead-${index}`);
    }
    expect(key).not.toBe(fifthSet);
    const answer = await initialize(replicaA, fifth);
    expect(answer.status).toBe(200);
    expect(await replicaA.redis.zcard(tenant)).toBe(1);
    expect(await replicaA.redis.zcard(fifthSet)).toBe(1);
  });
});
