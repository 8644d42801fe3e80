import { describe, expect, it } from 'vitest';
import { startFleet } from '../../apps/fleet/fleet.js';
import { loadConfig } from '../../libs/config/index.js';
import { redisAnswers } from '../../queues/index.js';
import { type EntryProcess, startEntryProcess } from '../fixtures/entry-process.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/** `npm start` as a user runs it: the fleet's entry point in a child process of its own. */
function startFleetProcess(env: Record<string, string>): EntryProcess {
  return startEntryProcess('apps/fleet/main.ts', env);
}

async function waitForOutput(output: () => string, pattern: RegExp, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!pattern.test(output())) {
    if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms; output:\n${output()}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe('the fleet as a process', () => {
  it('prints where everything is, and stops with exit code 0 on SIGTERM', async () => {
    const prefix = uniquePrefix('proc');
    const fleet = startFleetProcess({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      PORT: '0',
      BROWSER_WORKER_PORT: '0',
      LOG_LEVEL: 'warn',
    });
    await waitForOutput(fleet.output, /Stop with Ctrl-C\./, 45_000);
    const out = fleet.output();
    for (const label of ['API', 'API docs', 'Dashboard', 'Metrics', 'Health', 'Browser worker', 'Redis']) {
      expect(out).toMatch(new RegExp(`^  ${label} +\\S+`, 'm'));
    }
    const metricsUrl = /^ {2}Metrics +(\S+)/m.exec(out)?.[1] ?? '';
    expect((await fetch(metricsUrl)).status).toBe(200);
    fleet.child.kill('SIGTERM');
    expect(await fleet.exited).toBe(0);
  });

  it('stops on a bad setting with one line naming it', async () => {
    const fleet = startFleetProcess({ PORT: 'eighty' });
    expect(await fleet.exited).toBe(1);
    expect(fleet.output().trim()).toMatch(
      /^leasehold fleet: invalid configuration: PORT: expected number.*got "eighty"$/,
    );
  });

  it('says what to do when the configured Chromium is not there', async () => {
    const fleet = startFleetProcess({
      REDIS_URL: testRedisUrl(),
      BROWSER_EXECUTABLE: '/nonexistent/chromium',
      LOG_LEVEL: 'silent',
    });
    expect(await fleet.exited).toBe(1);
    expect(fleet.output().trim()).toBe(
      'leasehold fleet: BROWSER_EXECUTABLE is "/nonexistent/chromium", which is not an executable file; point it at Chromium or unset it',
    );
  });
});

describe('Redis for the fleet', () => {
  it('starts a private redis-server when REDIS_URL is unset and no local Redis answers, and stops it on close', async () => {
    const env = { PORT: '0', BROWSER_WORKER_PORT: '0', LOG_LEVEL: 'silent' };
    const fleet = await startFleet({
      config: loadConfig(env),
      logger: silentLogger(),
      localRedisUrl: 'redis://127.0.0.1:1',
    });
    try {
      expect(fleet.redisSource).toBe('private');
      expect(await redisAnswers(fleet.urls.redis)).toBe(true);
      const ready = await fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/readyz`);
      expect(ready.status).toBe(200);
    } finally {
      await fleet.close();
    }
    expect(await redisAnswers(fleet.urls.redis, 300)).toBe(false);
  });
});
