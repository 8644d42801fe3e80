import { ApiError, RateLimitedError } from '../../../libs/contracts/index.js';
import type { McpSessionSlot, McpSessionSlots } from '../../../libs/store/index.js';

/** The MCP session table's bounds in this process, as given (each optional) and as compiled. */
export interface McpSessionOptions {
  /**
   * Open MCP sessions this API process keeps, all tenants together: a bound on its memory (each
   * session keeps its MCP server and transport). Past it a new `initialize` answers 503
   * `unavailable` (after the idle ones are evicted). The fair share of each tenant and key is
   * bounded across the fleet by MCP_SESSIONS_PER_TENANT and MCP_SESSIONS_PER_KEY, in Redis.
   * Default 1 000.
   */
  maxSessions: number;
  /**
   * Milliseconds without a request after which a session is closed (one with a request in flight,
   * e.g. a `wait_for_run` or an open event stream, is never idle). Default 15 minutes.
   */
  idleMs: number;
}

const DEFAULTS: McpSessionOptions = { maxSessions: 1_000, idleMs: 15 * 60_000 };

/** The options with their defaults, checked once at start-up and frozen. */
export function compileMcpSessionOptions(
  given: Partial<McpSessionOptions> = {},
): Readonly<McpSessionOptions> {
  const options = { ...DEFAULTS, ...given };
  for (const [name, value] of Object.entries(options))
    if (!Number.isInteger(value) || value < 1)
      throw new Error(`MCP session option ${name}: expected a positive integer, got ${value}`);
  return Object.freeze(options);
}

/** One open MCP session as the table sees it. */
export interface McpSessionEntry {
  /** The `Mcp-Session-Id` the transport issued. */
  id: string;
  /** The tenant of the key that opened it: its place counts against the tenant's bound. */
  tenant: string;
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

function slotOf(entry: McpSessionEntry): McpSessionSlot {
  return { sessionId: entry.id, tenant: entry.tenant, keyId: entry.keyId };
}

/**
 * The MCP sessions open in this API process, bounded by count and idle time here, and per tenant
 * and per key across the fleet by their places in Redis ({@link McpSessionSlots}), which the table
 * renews while they live and gives back when they end. Sessions themselves live here, in memory:
 * a scaled-out API needs its load balancer to keep each `Mcp-Session-Id` on the replica that
 * issued it (sticky sessions).
 */
export class McpSessionTable<Entry extends McpSessionEntry = McpSessionEntry> {
  readonly #held = new Map<string, Held<Entry>>();
  readonly #sweeper: NodeJS.Timeout;
  readonly #renewer: NodeJS.Timeout;
  #closed = false;

  constructor(
    readonly options: Readonly<McpSessionOptions>,
    private readonly slots: McpSessionSlots,
    private readonly now: () => number = Date.now,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {
    // Checked four times per idle period: a session is closed at most a quarter late.
    this.#sweeper = setInterval(() => void this.sweep(), Math.max(1_000, Math.floor(options.idleMs / 4)));
    this.#sweeper.unref();
    // Renewed three times per place's life: a renewal lost to a Redis blip leaves two more.
    this.#renewer = setInterval(() => void this.renew(), Math.max(100, Math.floor(slots.limits.ttlMs / 3)));
    this.#renewer.unref();
  }

  get size(): number {
    return this.#held.size;
  }

  /**
   * Before a session opens: the idle ones are evicted, `unavailable` thrown when this process is
   * still full, and the session's place taken in its tenant's and key's counts — `rate_limited`
   * (with the wait until the soonest place lapses) when either holds its bound. The place is the
   * caller's to hand to {@link add}, or to give back with {@link abandon} if the session never opens.
   */
  async reserve(slot: McpSessionSlot): Promise<void> {
    if (this.#closed) throw new ApiError('unavailable', 'the API is shutting down');
    await this.sweep();
    if (this.#held.size >= this.options.maxSessions)
      throw new ApiError(
        'unavailable',
        `this API holds ${this.#held.size} open MCP sessions, its limit; retry later or end unused sessions with DELETE`,
      );
    const verdict = await this.slots.take(slot);
    if (verdict.taken) return;
    const bound =
      verdict.bound === 'key'
        ? `${this.slots.limits.perKey} open MCP sessions per API key`
        : `${this.slots.limits.perTenant} open MCP sessions per tenant`;
    throw new RateLimitedError(
      `at most ${bound}, across the fleet; end unused sessions with DELETE, or retry when one has idled out`,
      verdict.retryAfterMs,
    );
  }

  /** Gives back the place of a session that never opened (its initialize failed). */
  async abandon(slot: McpSessionSlot): Promise<void> {
    await this.slots.release(slot).catch(this.onError);
  }

  /** Keeps an opened session; its place was taken by {@link reserve}. */
  add(entry: Entry): void {
    this.#held.set(entry.id, { entry, lastSeenMs: this.now(), inFlight: 0 });
  }

  /** Forgets a session (its transport closed) and gives its place back; closing it is the caller's part. */
  async remove(id: string): Promise<void> {
    const held = this.#held.get(id);
    if (!held) return;
    this.#held.delete(id);
    await this.slots.release(slotOf(held.entry)).catch(this.onError);
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

  /** Closes every session idle for longer than `idleMs` with no request in flight. */
  async sweep(): Promise<void> {
    const cutoffMs = this.now() - this.options.idleMs;
    const idle = [...this.#held.values()].filter((held) => held.inFlight === 0 && held.lastSeenMs < cutoffMs);
    await Promise.all(idle.map((held) => this.#evict(held)));
  }

  /** Renews the places of every session held here (the timer's; a failure waits for the next). */
  async renew(): Promise<void> {
    await this.slots.renew([...this.#held.values()].map((held) => slotOf(held.entry))).catch(this.onError);
  }

  /** Closes every session and stops the timers (the API's close). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    clearInterval(this.#sweeper);
    clearInterval(this.#renewer);
    await Promise.all([...this.#held.values()].map((held) => this.#evict(held)));
  }

  async #evict(held: Held<Entry>): Promise<void> {
    await this.remove(held.entry.id);
    await held.entry.close().catch(() => undefined);
  }
}
