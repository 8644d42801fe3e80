import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * Nothing was limited (`rate_limited` was defined, never used). Each
 * API key may make API_RATE_BURST requests per window of burst ÷ rate seconds, counted in Redis
 * across replicas; past it, 429 `rate_limited` with Retry-After. Health, readiness and metrics
 * are never limited. Here: 5 a second, bursts of 10 (10 per 2 s).
 */
describe('per-key request limits on the API', { timeout: 60_000 }, () => {
  const env = { API_RATE_PER_SECOND: '5', API_RATE_BURST: '10' };
  let rig: ApiRig;
  let replica: ApiRig;

  beforeAll(async () => {
    rig = await startApiRig('rate-limit', env);
    replica = await startApiRig('rate-limit-replica', env, rig.prefix);
  });
  afterAll(async () => {
    await replica?.close();
    await rig?.close();
  });

  it('answers the request past the burst 429 rate_limited with Retry-After, and serves again after the window', async () => {
    const key = await rig.key('rl', 'alice', ['runs:read']);
    const statuses: number[] = [];
    let refused: Awaited<ReturnType<ApiRig['call']>> | undefined;
    for (let i = 0; i < 14; i++) {
      const answer = await rig.call('GET', '/v1/models', { key });
      statuses.push(answer.status);
      if (answer.status === 429) refused ??= answer;
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(200));
    expect(statuses.slice(10)).toEqual(Array(4).fill(429));
    expect(refused?.body).toEqual({ error: { code: 'rate_limited', message: expect.any(String) } });
    const retryAfterS = Number(refused?.headers.get('retry-after'));
    expect(retryAfterS).toBeGreaterThanOrEqual(1);
    expect(retryAfterS).toBeLessThanOrEqual(2);

    // Another key of the same tenant has its own count.
    const other = await rig.key('rl', 'bob', ['runs:read']);
    expect((await rig.call('GET', '/v1/models', { key: other })).status).toBe(200);

    // As long as Retry-After told the client to wait, and a little more: then the key is let in.
    await new Promise((resolve) => setTimeout(resolve, retryAfterS * 1_000 + 100));
    expect((await rig.call('GET', '/v1/models', { key })).status).toBe(200);
  });

  it('counts one key across API replicas', async () => {
    const key = await rig.key('rl', 'carol', ['runs:read']);
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      statuses.push((await rig.call('GET', '/v1/models', { key })).status);
      statuses.push((await replica.call('GET', '/v1/models', { key })).status);
    }
    expect(statuses.filter((status) => status === 200)).toHaveLength(10);
    expect(statuses.filter((status) => status === 429)).toHaveLength(2);
  });

  it('counts requests whose body the schema refuses', async () => {
    const key = await rig.key('rl', 'erin', ['admin']);
    for (let i = 0; i < 10; i++)
      expect((await rig.call('POST', '/v1/agents', { key, body: { model: 7 } })).status).toBe(422);
    expect((await rig.call('POST', '/v1/agents', { key, body: { model: 7 } })).status).toBe(429);
  });

  it('never limits health, readiness and metrics', async () => {
    for (const path of ['/healthz', '/readyz', '/metrics']) {
      const statuses = await Promise.all(Array.from({ length: 25 }, () => rig.call('GET', path)));
      expect(new Set(statuses.map((answer) => answer.status)), path).toEqual(new Set([200]));
    }
  });

  it('keys its Redis counts by the key id, never by the key itself', async () => {
    const key = await rig.key('rl', 'dave', ['runs:read']);
    await rig.call('GET', '/v1/models', { key });
    const names = await rig.storedKeys();
    const counters = names.filter((name) => name.startsWith(`${rig.prefix}:rate-limit:`));
    expect(counters.length).toBeGreaterThan(0);
    for (const name of names) expect(name).not.toContain(key.slice(4));
    for (const name of counters) expect(await rig.redis.get(name)).not.toContain(key.slice(4));
  });
});
