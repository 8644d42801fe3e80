import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** DESIGN §12 on REST: a profile's literal and localhost origins are judged when it is created. */
describe('REST profiles and the egress guard, in a fleet that allows no private range', () => {
  const prefix = uniquePrefix('egress-profiles');
  let api: ApiHandle;
  let admin: string;

  beforeAll(async () => {
    api = await startTestApi(prefix, { LEASEHOLD_EGRESS_ALLOW_CIDRS: '' });
    admin = (await api.store.createApiKey({ tenant: 'ep', principal: 'root', scopes: ['admin'] })).key;
  });

  afterAll(async () => {
    await api?.close();
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-egress-profiles-cleanup');
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  const create = (id: string, body: Record<string, unknown>) =>
    fetch(`${api.url}/v1/profiles`, {
      method: 'POST',
      headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
      body: JSON.stringify({ id, ...body }),
    });

  it('refuses the metadata address, redis and loopback in every spelling with 422 validation_failed', async () => {
    for (const origin of [
      'http://169.254.169.254',
      'http://[::ffff:127.0.0.1]',
      'http://2130706433',
      'http://0177.0.0.1:3001',
      'http://[::ffff:0:127.0.0.1]',
      'http://localhost:3000',
      'http://api.localhost',
      'http://[fd00:ec2::254]',
    ]) {
      const answer = await create('refused', { allowed_origins: ['https://example.com', origin] });
      expect({ origin, status: answer.status }).toEqual({ origin, status: 422 });
      const body = (await answer.json()) as { error: { code: string; message: string } };
      expect(body.error.code).toBe('validation_failed');
      expect(body.error.message).toMatch(/^allowed_origins\[\d\]: .*LEASEHOLD_EGRESS_ALLOW_CIDRS/);
    }
  });

  it('accepts names it cannot resolve here: they are judged at connection', async () => {
    const answer = await create('by-name', { allowed_origins: ['https://example.com', 'http://redis:6379'] });
    expect(answer.status).toBe(201);
  });
});
