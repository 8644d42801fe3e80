import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { startApi } from '../../apps/api/server.js';
import { startRunWorker } from '../../apps/run-worker/run-worker.js';
import { startSweeper } from '../../apps/sweeper/sweeper.js';
import { loadConfig } from '../../libs/config/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = fileURLToPath(new URL('../../node_modules/.bin/tsx', import.meta.url));
const TOKEN = 'a-data-plane-token-of-at-least-32-characters';

/**
 * The API, run worker and sweeper started and reported ready without a data-plane
 * token, and runs then silently got no browser. In production they refuse to start without one
 * unless browser tools are switched off on purpose (LEASEHOLD_BROWSER_TOOLS=off); /readyz names
 * the state.
 */
describe('no silent browserless runs', { timeout: 60_000 }, () => {
  const prefix = uniquePrefix('browser-tools');
  const closers: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
  });

  const configOf = (env: Record<string, string>) =>
    loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      PORT: '0',
      LOG_LEVEL: 'silent',
      ...env,
    });
  const roleOptions = (env: Record<string, string>) => ({
    config: configOf(env),
    logger: silentLogger(),
    metrics: createMetrics({ role: 'test' }),
    redisUrl: testRedisUrl(),
  });

  it('refuses to start an API, a run worker or a sweeper in production without a data-plane token', async () => {
    const production = { NODE_ENV: 'production' };
    for (const start of [
      () => startApi(roleOptions(production)),
      () => startRunWorker(roleOptions(production)),
      () => startSweeper(roleOptions(production)),
    ]) {
      await expect(start()).rejects.toThrow(/LEASEHOLD_DATA_PLANE_TOKEN.*LEASEHOLD_BROWSER_TOOLS=off/);
    }
  });

  it('says so in one line and exits 1 when started as `npm run api`', async () => {
    const result = await new Promise<{ code: number; stderr: string }>((resolve) => {
      execFile(
        TSX,
        ['apps/api/main.ts'],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            NODE_ENV: 'production',
            REDIS_URL: testRedisUrl(),
            LEASEHOLD_KEY_PREFIX: `${prefix}:`,
            PORT: '0',
            LEASEHOLD_DATA_PLANE_TOKEN: '',
          },
          timeout: 20_000,
        },
        (error, _stdout, stderr) => resolve({ code: error ? Number(error.code ?? 1) : 0, stderr }),
      );
    });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    expect(result.stderr).toContain('LEASEHOLD_DATA_PLANE_TOKEN');
  });

  it('starts in production with browser tools switched off, and /readyz says they are disabled', async () => {
    const api = await startApi(roleOptions({ NODE_ENV: 'production', LEASEHOLD_BROWSER_TOOLS: 'off' }));
    closers.push(() => api.close());
    const ready = await (await fetch(`${api.url}/readyz`)).json();
    expect(ready.checks).toContainEqual({ name: 'browser_tools:disabled', ok: true });
  });

  it('names browser tools enabled on /readyz when a token is set', async () => {
    const api = await startApi(roleOptions({ NODE_ENV: 'production', LEASEHOLD_DATA_PLANE_TOKEN: TOKEN }));
    closers.push(() => api.close());
    const ready = await (await fetch(`${api.url}/readyz`)).json();
    expect(ready.checks).toContainEqual({ name: 'browser_tools:enabled', ok: true });
  });
});
