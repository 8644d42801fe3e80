import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { uniquePrefix } from '../fixtures/redis.js';
import { roleCommand } from '../fixtures/role-command.js';
import { freePort, OwnRedis } from './own-redis.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** One role as its own process (its `main.ts`), with its stdout and stderr kept. */
interface Role {
  name: string;
  readyz: string;
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
}

function startRole(name: string, entry: string, port: number, env: Record<string, string>): Role {
  const child = spawn(process.execPath, roleCommand(entry), {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const role: Role = { name, readyz: `http://127.0.0.1:${port}/readyz`, child, stdout: [], stderr: [] };
  child.stdout?.on('data', (chunk: Buffer) => role.stdout.push(chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => role.stderr.push(chunk.toString()));
  return role;
}

async function readyStatus(role: Role): Promise<number> {
  try {
    return (await fetch(role.readyz, { signal: AbortSignal.timeout(5_000) })).status;
  } catch {
    return 0;
  }
}

function logLines(role: Role): Record<string, unknown>[] {
  return role.stdout
    .join('')
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>);
}

/**
 * The API, a run worker, the sweeper and a browser worker as real processes on a Redis of the test's own,
 * stopped for 5 s and started again. Each role's `/readyz` is 503 during the outage and 200
 * after, and each logs the outage as one JSON line down and one up — no raw `ECONNREFUSED` stack.
 */
describe('a Redis outage, seen by each role as a process', { timeout: 120_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'lh-redis-roles-'));
  let redis: OwnRedis;
  const roles: Role[] = [];

  beforeAll(async () => {
    redis = new OwnRedis(await freePort(), dir);
    await redis.start();
    const prefix = uniquePrefix('redis-roles');
    const env = {
      REDIS_URL: redis.url,
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: randomBytes(32).toString('base64url'),
      LEASEHOLD_SEAL_KEY: randomBytes(32).toString('base64'),
      ...(process.env.BROWSER_EXECUTABLE ? { BROWSER_EXECUTABLE: process.env.BROWSER_EXECUTABLE } : {}),
      LOG_LEVEL: 'info',
      LOG_PRETTY: 'false',
      SWEEP_INTERVAL_MS: '500',
      RUN_STALLED_INTERVAL_MS: '1000',
    };
    const [api, worker, sweeper, browser] = [
      await freePort(),
      await freePort(),
      await freePort(),
      await freePort(),
    ];
    roles.push(
      startRole('api', 'apps/api/main.ts', api, { ...env, PORT: String(api) }),
      startRole('run-worker', 'apps/run-worker/main.ts', worker, { ...env, RUN_WORKER_PORT: String(worker) }),
      startRole('sweeper', 'apps/sweeper/main.ts', sweeper, { ...env, SWEEPER_PORT: String(sweeper) }),
      startRole('browser-worker', 'apps/browser-worker/main.ts', browser, {
        ...env,
        BROWSER_WORKER_PORT: String(browser),
      }),
    );
    const deadline = Date.now() + 60_000;
    for (const role of roles)
      while ((await readyStatus(role)) !== 200) {
        if (Date.now() > deadline || role.child.exitCode !== null)
          throw new Error(`${role.name} did not become ready: ${role.stderr.join('')}`);
        await sleep(200);
      }
  });

  afterAll(async () => {
    await Promise.all(
      roles.map((role) => {
        if (role.child.exitCode !== null) return undefined;
        const exited = new Promise((resolve) => role.child.once('exit', resolve));
        role.child.kill('SIGTERM');
        return exited;
      }),
    );
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('each role is unready while Redis is away and ready after, and logs one line per change', async () => {
    const linesBefore = roles.map((role) => logLines(role).length);
    await redis.stop();
    await sleep(2_000);
    const during = await Promise.all(roles.map(readyStatus));
    // The outage goes on 3 s more: many reconnect attempts, none of which may add a line.
    await sleep(3_000);
    await redis.start();
    const deadline = Date.now() + 15_000;
    let after = await Promise.all(roles.map(readyStatus));
    while (after.some((status) => status !== 200) && Date.now() < deadline) {
      await sleep(200);
      after = await Promise.all(roles.map(readyStatus));
    }
    // Nothing but time can show an absence: a second more after every role is ready again gives a
    // flapping link or a late warning time to be logged, and no line beyond one down and one up may come.
    await sleep(1_000);

    const names = roles.map((role) => role.name);
    expect(Object.fromEntries(names.map((name, index) => [name, during[index]]))).toEqual({
      api: 503,
      'run-worker': 503,
      sweeper: 503,
      'browser-worker': 503,
    });
    expect(Object.fromEntries(names.map((name, index) => [name, after[index]]))).toEqual({
      api: 200,
      'run-worker': 200,
      sweeper: 200,
      'browser-worker': 200,
    });
    for (const role of roles) {
      const changes = logLines(role)
        .filter((line) => line.redis === 'down' || line.redis === 'up')
        .map((line) => line.redis);
      expect({ role: role.name, changes }).toEqual({ role: role.name, changes: ['down', 'up'] });
      expect({ role: role.name, stderr: role.stderr.join('') }).toEqual({ role: role.name, stderr: '' });
      // Nothing else warns about the outage: no line per reconnect attempt, per connection.
      const warnings = logLines(role)
        .slice(linesBefore[roles.indexOf(role)])
        .filter((line) => Number(line.level) >= 40)
        .map((line) => line.msg);
      expect({ role: role.name, warnings }).toEqual({
        role: role.name,
        warnings: ['redis unreachable: runs wait, /readyz answers 503'],
      });
      expect({ role: role.name, stack: role.stdout.join('').includes('ECONNREFUSED\\n    at') }).toEqual({
        role: role.name,
        stack: false,
      });
    }
  });
});
