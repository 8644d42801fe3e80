import { ApiError } from '../../../libs/contracts/index.js';

/** The MCP session table's bounds, as given (each optional) and as compiled. */
export interface McpSessionOptions {
  /**
   * Open MCP sessions this API process keeps, all keys together. Past it a new `initialize` answers
   * 503 `unavailable` (after the idle ones are evicted). Too small refuses clients at busy times;
   * too large lets forgotten sessions hold memory (each keeps its MCP server and transport).
   * Default 1 000.
   */
  maxSessions: number;
  /**
   * Open MCP sessions one API key keeps. A key at its cap that opens another closes its own least
   * recently used one: a client that never sends DELETE does not lock itself out, and one key never
   * fills the table for the others. Default 16.
   */
  maxSessionsPerKey: number;
  /**
   * Milliseconds without a request after which a session is closed (one with a request in flight,
   * e.g. a `wait_for_run` or an open event stream, is never idle). Default 15 minutes.
   */
  idleMs: number;
}

const DEFAULTS: McpSessionOptions = { maxSessions: 1_000, maxSessionsPerKey: 16, idleMs: 15 * 60_000 };

/** The options with their defaults, checked once at start-up and frozen. */
export function compileMcpSessionOptions(
  given: Partial<McpSessionOptions> = {},
): Readonly<McpSessionOptions> {
  const options = { ...DEFAULTS, ...given };
  for (const [name, value] of Object.entries(options))
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`MCP session option ${name}: expected a positive integer, got ${value}`);
  if (options.maxSessionsPerKey > options.maxSessions)
    throw new Error(
      `MCP session option maxSessionsPerKey (${options.maxSessionsPerKey}) exceeds maxSessions (${options.maxSessions})`,
    );
  return Object.freeze(options);
}

/** One open MCP session as the table sees it. */
export interface McpSessionEntry {
  /** The `Mcp-Session-Id` the transport issued. */
  id: string;
  /** The API key that opened it: no other key may use it. */
  keyId: string;
  /** The path it was opened at (`/mcp`, or `/mcp/browser/<session>`): it answers nowhere else. */
  route: string;
  /** Ends the session: its transport (open streams included) and whatever it drives. Idempotent. */
  close(): Promise<void>;
}

interface Held<Entry> {
  entry: Entry;
  lastSeenMs: number;
  inFlight: number;
}

/**
 * The MCP sessions open in this API process, bounded by count (overall and per key) and by idle
 * time. State lives here, in memory: a scaled-out API needs its load balancer to keep each
 * `Mcp-Session-Id` on the replica that issued it (sticky sessions).
 */
export class McpSessionTable<Entry extends McpSessionEntry = McpSessionEntry> {
  readonly #held = new Map<string, Held<Entry>>();
  readonly #sweeper: NodeJS.Timeout;
  #closed = false;

  constructor(
    readonly options: Readonly<McpSessionOptions>,
    private readonly now: () => number = Date.now,
  ) {
    // Checked four times per idle period: a session is closed at most a quarter late.
    this.#sweeper = setInterval(() => void this.sweep(), Math.max(1_000, Math.floor(options.idleMs / 4)));
    this.#sweeper.unref();
  }

  get size(): number {
    return this.#held.size;
  }

  add(entry: Entry): void {
    this.#held.set(entry.id, { entry, lastSeenMs: this.now(), inFlight: 0 });
  }

  /** Forgets a session (its transport closed); closing it is the caller's part. */
  remove(id: string): void {
    this.#held.delete(id);
  }

  /**
   * The session `id` when `keyId` opened it at `route`, marked as just used; otherwise undefined,
   * so another key learns nothing of it (the caller answers 404 as for an unknown id).
   */
  find(id: string, keyId: string, route: string): Entry | undefined {
    const held = this.#held.get(id);
    if (!held || held.entry.keyId !== keyId || held.entry.route !== route) return undefined;
    held.lastSeenMs = this.now();
    return held.entry;
  }

  /** Marks a request of `entry` in flight; the answer marks it done (and the session just used). */
  begin(entry: Entry): () => void {
    const held = this.#held.get(entry.id);
    if (!held) return () => undefined;
    held.inFlight += 1;
    let done = false;
    return () => {
      if (done) return;
      done = true;
      held.inFlight -= 1;
      held.lastSeenMs = this.now();
    };
  }

  /**
   * Before `keyId` opens a session: the idle ones are evicted, the key's least recently used one
   * closed when it is at its cap, and `unavailable` thrown when the table is still full.
   */
  async makeRoom(keyId: string): Promise<void> {
    if (this.#closed) throw new ApiError('unavailable', 'the API is shutting down');
    await this.sweep();
    const own = [...this.#held.values()].filter((held) => held.entry.keyId === keyId);
    if (own.length >= this.options.maxSessionsPerKey) {
      const oldest = own.reduce((least, held) => (held.lastSeenMs < least.lastSeenMs ? held : least));
      await this.#evict(oldest);
    }
    if (this.#held.size >= this.options.maxSessions)
      throw new ApiError(
        'unavailable',
        `this API holds ${this.#held.size} open MCP sessions, its limit; retry later or end unused sessions with DELETE`,
      );
  }

  /** Closes every session idle for longer than `idleMs` with no request in flight. */
  async sweep(): Promise<void> {
    const cutoffMs = this.now() - this.options.idleMs;
    const idle = [...this.#held.values()].filter((held) => held.inFlight === 0 && held.lastSeenMs < cutoffMs);
    await Promise.all(idle.map((held) => this.#evict(held)));
  }

  /** Closes every session and stops the sweeps (the API's close). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    await Promise.all([...this.#held.values()].map((held) => this.#evict(held)));
  }

  async #evict(held: Held<Entry>): Promise<void> {
    this.#held.delete(held.entry.id);
    await held.entry.close().catch(() => undefined);
  }
}
