import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  closeRedis,
  closeWorker,
  connectRedis,
  createQueueWorker,
  MAX_RECONNECT_DELAY_MS,
} from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * the hold on the stall check, as CI found it: two workers' connections come back up to a
 * retry delay apart (the reconnect strategy waits up to MAX_RECONNECT_DELAY_MS between attempts).
 * A hold of one stall interval set by the first let its check run before the second had re-locked
 * its jobs, and every run of the second ended outcome_unknown. The hold a reconnecting worker
 * sets must outlast a stall interval plus the slowest peer's reconnection.
 */
describe('the stall-check hold a worker sets when its Redis connection comes back', () => {
  const prefix = uniquePrefix('stall-hold');
  const queueName = `hold-${Math.random().toString(36).slice(2, 10)}`;
  const stalledIntervalMs = 1_000;
  let admin: Redis;

  beforeAll(async () => {
    admin = await connectRedis(testRedisUrl(), 'producer', 'test-stall-hold');
  });

  afterAll(async () => {
    const keys = await admin.keys(`${prefix}:*`);
    if (keys.length > 0) await admin.del(...keys);
    await closeRedis(admin);
  });

  it('outlasts a stall interval plus the slowest reconnection of another worker', async () => {
    const worker = await createQueueWorker(queueName, async () => 'done', {
      redisUrl: testRedisUrl(),
      prefix,
      concurrency: 1,
      lockDurationMs: 2_000,
      stalledIntervalMs,
      maxStalledCount: 1,
      logger: silentLogger(),
    });
    try {
      const clients = (await admin.client('LIST')) as string;
      const ids = clients
        .split('\n')
        .filter((line) => line.includes(` name=leasehold:${queueName}-worker `))
        .map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1])
        .filter((id): id is string => id !== undefined);
      expect(ids.length).toBeGreaterThan(0);
      for (const id of ids) await admin.client('KILL', 'ID', id);

      const holdKey = `${prefix}:${queueName}:stalled-check`;
      const deadline = Date.now() + 10_000;
      let pttl = -2;
      while (Date.now() < deadline) {
        pttl = await admin.pttl(holdKey);
        if (pttl > stalledIntervalMs) break;
        await sleep(20);
      }
      // The worker's own check sets the key for one stall interval; the hold is longer.
      expect(pttl).toBeGreaterThan(stalledIntervalMs + MAX_RECONNECT_DELAY_MS);
    } finally {
      await closeWorker(worker, 5_000);
    }
  });
});
