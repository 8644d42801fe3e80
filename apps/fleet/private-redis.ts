import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { StartupError } from '../../libs/shutdown/index.js';
import { redisAnswers } from '../../queues/index.js';

export interface PrivateRedis {
  url: string;
  stop(): Promise<void>;
}

const READY_TIMEOUT_MS = 10_000;

/** A free TCP port on 127.0.0.1, as the kernel hands it out. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() =>
        typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port')),
      );
    });
  });
}

/**
 * A `redis-server` child of this process in a temporary folder, keeping nothing on disk; `stop()`
 * ends it and removes the folder. For a machine with no Redis of its own.
 */
export async function startPrivateRedis(executable = 'redis-server'): Promise<PrivateRedis> {
  const dir = await mkdtemp(join(tmpdir(), 'leasehold-redis-'));
  const port = await freePort();
  const child: ChildProcess = spawn(
    executable,
    ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir],
    { stdio: 'ignore' },
  );
  const spawnFailure = new Promise<never>((_, reject) => {
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'ENOENT'
          ? new StartupError(
              'no Redis: nothing answers on 127.0.0.1:6379 and redis-server is not installed; install it (Debian/Ubuntu: `apt-get install redis-server`) or set REDIS_URL',
            )
          : error,
      ),
    );
  });
  spawnFailure.catch(() => {});
  const url = `redis://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    }
    await rm(dir, { recursive: true, force: true });
  };

  const deadline = Date.now() + READY_TIMEOUT_MS;
  try {
    for (;;) {
      const answered = await Promise.race([redisAnswers(url, 500), spawnFailure]);
      if (answered) return { url, stop };
      if (child.exitCode !== null) throw new StartupError(`redis-server exited with code ${child.exitCode}`);
      if (Date.now() > deadline) throw new StartupError(`redis-server did not answer on ${url} within 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  } catch (error) {
    await stop();
    throw error;
  }
}
