import type { Logger } from 'pino';

type Closer = () => Promise<void> | void;

/**
 * Owns the order in which a process lets go of what it holds: closers run in the reverse of
 * their registration (stop claiming before closing the connection the claims use). `close()` is
 * idempotent, and one failing closer does not keep the others from running.
 */
export class Shutdown {
  readonly #closers: Array<{ name: string; close: Closer }> = [];
  #closing: Promise<void> | undefined;

  constructor(private readonly logger: Logger) {}

  /** Registers `close`, to run before everything registered earlier. */
  add(name: string, close: Closer): void {
    if (this.#closing) throw new Error(`cannot add "${name}": shutdown has begun`);
    this.#closers.push({ name, close });
  }

  get closing(): boolean {
    return this.#closing !== undefined;
  }

  close(): Promise<void> {
    this.#closing ??= this.#run();
    return this.#closing;
  }

  async #run(): Promise<void> {
    for (const { name, close } of [...this.#closers].reverse()) {
      try {
        await close();
        this.logger.debug({ component: name }, 'closed');
      } catch (error) {
        this.logger.error({ component: name, err: error }, 'close failed');
      }
    }
  }
}

export interface SignalOptions {
  /** Longest the whole shutdown may take before the process is forced out. */
  timeoutMs: number;
  logger: Logger;
  exit?: (code: number) => void;
}

/**
 * SIGTERM/SIGINT: stop gracefully within `timeoutMs`, then exit 0; past the bound (or on a second
 * signal) exit 1 at once. Work still in flight then is handed back: its BullMQ lock lapses and the
 * job stalls to another worker.
 */
export function exitOnSignals(shutdown: Shutdown, options: SignalOptions): void {
  const exit = options.exit ?? ((code: number) => process.exit(code));
  const onSignal = (signal: NodeJS.Signals) => {
    if (shutdown.closing) {
      options.logger.warn({ signal }, 'second signal: exiting now');
      exit(1);
      return;
    }
    options.logger.info({ signal, timeout_ms: options.timeoutMs }, 'shutting down');
    const force = setTimeout(() => {
      options.logger.error({ timeout_ms: options.timeoutMs }, 'shutdown bound passed: forcing exit');
      exit(1);
    }, options.timeoutMs);
    force.unref();
    void shutdown.close().then(() => {
      clearTimeout(force);
      options.logger.info('stopped');
      exit(0);
    });
  };
  process.once('SIGTERM', onSignal);
  process.once('SIGINT', onSignal);
  // A second signal while closing forces the exit.
  shutdown.add('signal-handlers', () => {
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
}
