import type { Logger } from 'pino';
import { isRedisUnreachable } from '../telemetry/redis-link.js';

/**
 * A periodic task that never overlaps itself: the next pass is scheduled when the previous one
 * ends. `close()` is idempotent and waits for a pass in progress. A failing pass is logged and the
 * schedule goes on.
 */
export class IntervalTask {
  #timer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #closed = false;
  #passes = 0;

  constructor(
    private readonly name: string,
    private readonly intervalMs: number,
    private readonly pass: () => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** Completed passes, failed or not. */
  get passes(): number {
    return this.#passes;
  }

  start({ runNow = false }: { runNow?: boolean } = {}): this {
    if (this.#closed) throw new Error(`${this.name}: started after close`);
    this.#schedule(runNow ? 0 : this.intervalMs);
    return this;
  }

  /** Runs one pass now (unless one is running, which it then awaits). */
  runOnce(): Promise<void> {
    this.#running ??= this.pass()
      .catch((error: unknown) => {
        // An outage is logged once, by the link watch; the passes it fails are not (one line per outage).
        if (isRedisUnreachable(error)) this.logger.debug({ task: this.name }, 'pass met a Redis outage');
        else this.logger.error({ task: this.name, err: error }, 'pass failed');
      })
      .finally(() => {
        this.#passes += 1;
        this.#running = undefined;
      });
    return this.#running;
  }

  async close(): Promise<void> {
    this.#closed = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  #schedule(delayMs: number): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.runOnce().then(() => this.#schedule(this.intervalMs));
    }, delayMs);
  }
}
