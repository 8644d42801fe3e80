import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * With an admin key an attacker made 64 new keys: nothing bounded a tenant's keys. A tenant now
 * holds at most API_KEYS_PER_TENANT live keys (100 by default), counted in Redis by every replica
 * alike; one more answers 429 `rate_limited` with Retry-After, and a revoked key frees its place.
 * Each key made over REST names the key that made it.
 */
describe("a tenant's API keys are bounded and name their maker", { timeout: 60_000 }, () => {
  let rig: ApiRig;

  beforeAll(async () => {
    rig = await startApiRig('api-key-limits');
  });
  afterAll(() => rig?.close());

  it('refuses the 101st live key with 429 and Retry-After, and takes one again after a revocation', async () => {
    const admin = await rig.key('full', 'ops', ['admin']);
    // The operator's keys count as any other: 99 live keys, before REST makes the 100th.
    for (let made = 1; made < 99; made += 1)
      await rig.api.store.createApiKey({ tenant: 'full', principal: `bot-${made}`, scopes: ['runs:read'] });
    const body = { principal: 'bot', scopes: ['runs:read'] };
    const hundredth = await rig.call('POST', '/v1/api-keys', { key: admin, body });
    expect(hundredth.status).toBe(201);

    const refused = await rig.call('POST', '/v1/api-keys', { key: admin, body });
    expect(refused.status).toBe(429);
    expect(refused.body.error).toEqual({
      code: 'rate_limited',
      message: expect.stringContaining('at most 100 API keys (API_KEYS_PER_TENANT)'),
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
    const listed = await rig.call('GET', '/v1/api-keys', { key: admin });
    expect(listed.body.api_keys).toHaveLength(100);
    // Another tenant is not bounded by this one's keys.
    const elsewhere = await rig.key('not-full', 'ops', ['admin']);
    expect((await rig.call('POST', '/v1/api-keys', { key: elsewhere, body })).status).toBe(201);

    expect((await rig.call('DELETE', `/v1/api-keys/${hundredth.body.key_id}`, { key: admin })).status).toBe(
      204,
    );
    expect((await rig.call('POST', '/v1/api-keys', { key: admin, body })).status).toBe(201);
    expect((await rig.call('POST', '/v1/api-keys', { key: admin, body })).status).toBe(429);
  });

  it('counts across API replicas: keys created at once on two replicas never pass the bound', async () => {
    const env = { API_KEYS_PER_TENANT: '4' };
    const first = await startApiRig('api-key-limits-replicas', env);
    const second = await startApiRig('api-key-limits-replicas', env, first.prefix);
    try {
      const admin = await first.key('replicas', 'ops', ['admin']);
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, index) =>
          (index % 2 === 0 ? first : second).call('POST', '/v1/api-keys', {
            key: admin,
            body: { principal: `bot-${index}`, scopes: ['runs:read'] },
          }),
        ),
      );
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([201, 201, 201, 429, 429, 429, 429, 429]);
      expect((await second.call('GET', '/v1/api-keys', { key: admin })).body.api_keys).toHaveLength(4);
    } finally {
      await second.close();
      await first.close();
    }
  });

  it('records the key that made each key: none for the operator’s, the maker’s id for one made over REST', async () => {
    const admin = await rig.key('makers', 'ops', ['admin']);
    const made = await rig.call('POST', '/v1/api-keys', {
      key: admin,
      body: { principal: 'bot', scopes: ['runs:read'] },
    });
    expect(made.status).toBe(201);
    const [adminId] = (await rig.call('GET', '/v1/api-keys', { key: admin })).body.api_keys.map(
      (view: { key_id: string }) => view.key_id,
    );
    expect(made.body.created_by).toBe(adminId);
    const listed = (await rig.call('GET', '/v1/api-keys', { key: admin })).body.api_keys;
    expect(listed.map((view: { created_by: string | null }) => view.created_by)).toEqual([null, adminId]);
  });
});
