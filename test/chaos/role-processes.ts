import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { roleCommand } from '../fixtures/role-command.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * One role of the fleet as its own process (its `apps/<role>/main.ts`), as an operator starts it:
 * the environment is `env` with only PATH and HOME added. Its output is kept for diagnosis.
 */
export class RoleProcess {
  readonly child: ChildProcess;
  readonly #output: string[] = [];
  readonly exited: Promise<void>;

  constructor(
    readonly name: string,
    readonly entry: string,
    readonly port: number,
    readonly env: Record<string, string>,
  ) {
    this.child = spawn(process.execPath, roleCommand(entry), {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.child.stdout?.on('data', (chunk: Buffer) => this.#output.push(chunk.toString()));
    this.child.stderr?.on('data', (chunk: Buffer) => this.#output.push(chunk.toString()));
    this.exited = new Promise((resolve) => this.child.once('exit', () => resolve()));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  output(): string {
    return this.#output.join('');
  }

  /**
   * The same role again: same entry and environment (a browser worker keeps its id and port).
   * `port`: another port for the new process (its variable named by `portVariable`), for a
   * replacement started while the old one still drains on its own.
   */
  restart(name = this.name, port?: { port: number; portVariable: string }): RoleProcess {
    if (!port) return new RoleProcess(name, this.entry, this.port, this.env);
    return new RoleProcess(name, this.entry, port.port, {
      ...this.env,
      [port.portVariable]: String(port.port),
    });
  }

  async readyStatus(): Promise<number> {
    try {
      return (await fetch(`http://127.0.0.1:${this.port}/readyz`, { signal: AbortSignal.timeout(3_000) }))
        .status;
    } catch {
      return 0;
    }
  }

  /** Waits for `/readyz` to answer 200; throws with the role's output if it exits or takes too long. */
  async ready(timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while ((await this.readyStatus()) !== 200) {
      if (!this.running) throw new Error(`${this.name} exited before it was ready:\n${this.output()}`);
      if (Date.now() > deadline) throw new Error(`${this.name} was not ready in time:\n${this.output()}`);
      await sleep(200);
    }
  }

  /** Sends `signal` and waits for the process to exit (SIGKILL after `forceAfterMs`). */
  async stop(signal: NodeJS.Signals, forceAfterMs = 20_000): Promise<void> {
    if (!this.running) return;
    this.child.kill(signal);
    const forced = setTimeout(() => this.child.kill('SIGKILL'), forceAfterMs);
    await this.exited;
    clearTimeout(forced);
  }
}

/** A role's REST answer: its status and JSON body, or status 0 and the error when none came. */
export interface RoleAnswer {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: REST answers of many shapes, read field by field.
  body: any;
}

/** One REST call to the API role on `port` with `apiKey`, bounded at 10 s; never throws. */
export async function callApi(
  port: number | undefined,
  apiKey: string,
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<RoleAnswer> {
  try {
    const response = await fetch(`http://127.0.0.1:${port}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      signal: AbortSignal.timeout(10_000),
    });
    const text = await response.text();
    return { status: response.status, body: text ? JSON.parse(text) : undefined };
  } catch (error) {
    return { status: 0, body: { error: String(error) } };
  }
}
