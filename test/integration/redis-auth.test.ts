import type { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type PrivateRedis, startPrivateRedis } from '../../apps/fleet/private-redis.js';
import { loadConfig } from '../../libs/config/index.js';
import { RunStore } from '../../libs/store/index.js';
import {
  closeRedis,
  clusterOptions,
  connectRedis,
  createQueueWorker,
  createRunsQueue,
  enqueueRun,
  type RedisClient,
  RUNS_QUEUE,
  type RunJob,
  type RunsQueue,
  redisTarget,
} from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/** A password with characters a URL must escape. */
const PASSWORD = 'p@ss:w/rd-Ü';

/**
 * Redis users and passwords in REDIS_URL (`redis://user:password@host:port`). The test's
 * own redis-server gets an ACL user limited to the deployment's key and queue prefixes, so every
 * command the store and BullMQ send must go through that user to succeed.
 */
describe('REDIS_URL with a user and a password', { timeout: 60_000 }, () => {
  const prefix = uniquePrefix('redis-auth');
  let server: PrivateRedis;
  let port: string;
  let url: string;
  let redis: RedisClient | undefined;
  let queue: RunsQueue | undefined;
  let worker: Worker<RunJob, void, string> | undefined;

  beforeAll(async () => {
    server = await startPrivateRedis();
    port = new URL(server.url).port;
    const admin = new Redis(server.url);
    // The user ops/redis.conf documents: its own keys and channels, every command but the admin ones.
    await admin.call(
      'ACL',
      'SETUSER',
      'leasehold',
      'on',
      `>${PASSWORD}`,
      'resetkeys',
      `~${prefix}:*`,
      'resetchannels',
      `&${prefix}:*`,
      '+@all',
      '-@admin',
    );
    admin.disconnect();
    url = `redis://leasehold:${encodeURIComponent(PASSWORD)}@127.0.0.1:${port}`;
  });

  afterAll(async () => {
    await worker?.close();
    await queue?.close();
    if (redis) await closeRedis(redis);
    await server?.stop();
  });

  it('connects as the user, and the store and the queue work within its keys', async () => {
    const config = loadConfig({ REDIS_URL: url, LEASEHOLD_KEY_PREFIX: `${prefix}:`, QUEUE_PREFIX: prefix });
    redis = await connectRedis(redisTarget(config.redis), 'worker', 'test-redis-auth');
    expect(await redis.call('ACL', 'WHOAMI')).toBe('leasehold');
    // The user really is limited: a key outside its prefix is refused.
    await expect(redis.set('elsewhere', '1')).rejects.toThrow(/NOPERM/);

    const store = new RunStore(redis, config.redis.keyPrefix);
    const sessionId = await createTestSession(store, 'acme', { instructions: 'answer' });
    const { run } = await store.submitRun({
      tenant: 'acme',
      principal: 'alice',
      sessionId,
      input: 'hello',
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    expect((await store.getRun(run.id))?.status).toBe('queued');

    queue = createRunsQueue(redis, config.redis.queuePrefix);
    let processed!: (runId: string) => void;
    const done = new Promise<string>((resolve) => {
      processed = resolve;
    });
    worker = await createQueueWorker<RunJob, void>(RUNS_QUEUE, async (job) => processed(job.data.runId), {
      redisUrl: redisTarget(config.redis),
      prefix: config.redis.queuePrefix,
      concurrency: 1,
      lockDurationMs: 5_000,
      stalledIntervalMs: 5_000,
      maxStalledCount: 1,
      logger: silentLogger(),
    });
    await enqueueRun(queue, { runId: run.id, execution: run.execution, enqueuedAtMs: Date.now() });
    expect(await done).toBe(run.id);
  });

  it('refuses a wrong password with a message that names the server but not the password', async () => {
    const wrong = `redis://leasehold:not-the-password@127.0.0.1:${port}`;
    const refusal = await connectRedis(wrong, 'producer', 'test-redis-auth-wrong').then(
      (client) => {
        client.disconnect();
        return undefined;
      },
      (error: Error) => error.message,
    );
    expect(refusal).toContain(`redis://***@127.0.0.1:${port}`);
    expect(refusal).not.toContain('not-the-password');
  });

  it('gives every cluster node the user and password of the node URLs, decoded', () => {
    const options = clusterOptions('worker', 'test', [
      '127.0.0.1:7000',
      `redis://leasehold:${encodeURIComponent(PASSWORD)}@127.0.0.1:7001`,
    ]);
    expect(options.redisOptions).toMatchObject({ username: 'leasehold', password: PASSWORD });
    expect(options.redisOptions?.maxRetriesPerRequest).toBeNull();
  });
});
