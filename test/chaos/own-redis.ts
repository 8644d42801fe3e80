import { type ChildProcess, spawn } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';

/** A free TCP port on 127.0.0.1 (free when asked; a test uses it at once). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/**
 * A redis-server of a chaos test's own, AOF on, that the test stops and starts again
 * on the same port and folder: `redis-server --port N --save '' --appendonly yes --dir <dir>`.
 */
export class OwnRedis {
  #process: ChildProcess | undefined;
  constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'yes',
        '--dir',
        this.dir,
      ],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    );
    this.#process = child;
    await new Promise<void>((resolve, reject) => {
      child.once('exit', (code) => reject(new Error(`redis-server exited ${code}`)));
      child.stdout?.on('data', (chunk: Buffer) => {
        if (chunk.toString().includes('Ready to accept connections')) resolve();
      });
    });
  }

  /** SIGSTOP: the server keeps its connections open and answers nothing (a partition without resets). */
  freeze(): void {
    this.#process?.kill('SIGSTOP');
  }

  /** SIGCONT: the frozen server reads what waited on its connections, in order, and answers again. */
  thaw(): void {
    this.#process?.kill('SIGCONT');
  }

  async stop(): Promise<void> {
    const child = this.#process;
    if (!child || child.exitCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  }
}
