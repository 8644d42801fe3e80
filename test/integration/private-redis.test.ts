import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { startPrivateRedis } from '../../apps/fleet/private-redis.js';
import { closeRedis, connectRedis, redisAnswers } from '../../queues/index.js';

describe('the private redis-server of the fleet', () => {
  it('starts a redis-server child that answers, and stops it on request', async () => {
    const redis = await startPrivateRedis();
    expect(await redisAnswers(redis.url)).toBe(true);
    await redis.stop();
    expect(await redisAnswers(redis.url, 300)).toBe(false);
  });

  it('says what to install when redis-server is missing', async () => {
    await expect(startPrivateRedis('/nonexistent/redis-server')).rejects.toThrow(
      /install it \(Debian\/Ubuntu: `apt-get install redis-server`\) or set REDIS_URL/,
    );
  });

  it('a producer connection fails at once while Redis is away; a worker connection waits and rides out a restart', async () => {
    const redis = await startPrivateRedis();
    const producer = await connectRedis(redis.url, 'producer', 'test-producer');
    const worker = await connectRedis(redis.url, 'worker', 'test-worker');
    await worker.set('k', 'before');
    const port = Number(new URL(redis.url).port);
    await redis.stop();

    // Wait until both clients noticed the server went away.
    while (producer.status === 'ready' || worker.status === 'ready')
      await new Promise((r) => setTimeout(r, 20));
    const failedAt = Date.now();
    await expect(producer.get('k')).rejects.toThrow();
    expect(Date.now() - failedAt).toBeLessThan(1_000);

    const pending = worker.get('k');
    const restarted = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      {
        stdio: 'ignore',
      },
    );
    try {
      // Nothing persisted across the restart: the value is gone, but the command was not lost.
      expect(await pending).toBeNull();
    } finally {
      producer.disconnect();
      await closeRedis(worker);
      restarted.kill('SIGTERM');
      await new Promise((resolve) => restarted.once('exit', resolve));
    }
  });
});
