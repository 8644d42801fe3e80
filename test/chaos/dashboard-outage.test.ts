import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiHandle, startApi } from '../../apps/api/server.js';
import { loadConfig } from '../../libs/config/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { freePort, OwnRedis } from './own-redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * While Redis was down, Bull Board answered 500 `internal` where the REST API
 * answers 503 `unavailable`. The API runs on a redis-server of the test's own, which is stopped.
 */
describe('the dashboard during a Redis outage', { timeout: 60_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-dashboard-outage-'));
  let ownRedis: OwnRedis;
  let api: ApiHandle;
  let operatorKey: string;

  beforeAll(async () => {
    ownRedis = new OwnRedis(await freePort(), dir);
    await ownRedis.start();
    const prefix = uniquePrefix('dashboard-outage');
    api = await startApi({
      config: loadConfig({
        REDIS_URL: ownRedis.url,
        LEASEHOLD_KEY_PREFIX: `${prefix}:`,
        QUEUE_PREFIX: prefix,
        PORT: '0',
        LOG_LEVEL: 'silent',
      }),
      logger: silentLogger(),
      metrics: createMetrics({ role: 'api' }),
      redisUrl: ownRedis.url,
    });
    operatorKey = (await api.store.createApiKey({ tenant: 'ops', principal: 'oncall', scopes: ['operator'] }))
      .key;
  });

  afterAll(async () => {
    await api?.close();
    await ownRedis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function board(): Promise<{ status: number; body: unknown }> {
    const response = await fetch(`${api.url}/admin/queues/api/queues`, {
      headers: { authorization: `Bearer ${operatorKey}` },
      signal: AbortSignal.timeout(10_000),
    });
    return { status: response.status, body: await response.json() };
  }

  it('answers 503 unavailable in the one error shape while Redis is down, and 200 once it is back', async () => {
    expect((await board()).status).toBe(200);

    await ownRedis.stop();
    await expect.poll(board, { timeout: 5_000 }).toEqual({
      status: 503,
      body: { error: { code: 'unavailable', message: 'the store did not answer; retry shortly' } },
    });

    await ownRedis.start();
    const deadline = Date.now() + 15_000;
    let after = await board();
    while (after.status !== 200 && Date.now() < deadline) {
      await sleep(200);
      after = await board();
    }
    expect(after.status).toBe(200);
  });
});
