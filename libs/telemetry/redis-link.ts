import type { Logger } from 'pino';

/** The events of a Redis client the watch listens to (ioredis names them so), and its PING. */
export interface RedisLinkEvents {
  on(event: 'ready' | 'reconnecting' | 'error' | 'end', listener: (...args: unknown[]) => void): unknown;
  /** The liveness ping; a client without one is judged by its events alone. */
  ping?(): Promise<unknown>;
  readonly status?: string;
}

/** How long Redis may take to answer by default (REDIS_ANSWER_TIMEOUT_MS). */
export const DEFAULT_ANSWER_TIMEOUT_MS = 2_000;

/** Pings per answer bound: a freeze is seen within 1⅛ bounds of its start. */
const PINGS_PER_BOUND = 8;

/** Error codes and messages that mean "Redis did not answer", not "Redis refused the command". */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENOTFOUND',
]);
const UNREACHABLE_MESSAGES = [
  "Stream isn't writeable",
  'Connection is closed',
  'Reached the max retries per request limit',
  'connect ECONNREFUSED',
  // ioredis' command timeout: a Redis that froze (SIGSTOP, a partition without resets).
  'Command timed out',
  'Redis did not answer',
];

/**
 * Whether an error (or one of its causes) says Redis could not be reached (the API
 * answers 503 `unavailable` for it, the run worker hands the run back instead of failing it).
 */
export function isRedisUnreachable(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth += 1) {
    const code = (cause as NodeJS.ErrnoException).code;
    if (code && UNREACHABLE_CODES.has(code)) return true;
    if (cause.name === 'MaxRetriesPerRequestError') return true;
    if (UNREACHABLE_MESSAGES.some((message) => cause instanceof Error && cause.message.includes(message)))
      return true;
    cause = cause.cause;
  }
  return false;
}

/**
 * Whether this process's Redis connections answer, and ONE log line per change of that:
 * an outage is `redis: "down"` once — not a multi-line `ECONNREFUSED` stack per connection per
 * reconnect attempt — and `redis: "up"` once when every connection is back. Readiness reads it
 * (every role's `/readyz` answers 503 while a connection is down).
 */
export class RedisLink {
  readonly #down = new Set<RedisLinkEvents>();
  #state: 'up' | 'down' = 'up';
  #downSinceMs = 0;
  #logger: Logger | undefined;
  #answerTimeoutMs = DEFAULT_ANSWER_TIMEOUT_MS;
  #waiting: Array<() => void> = [];

  /** Where the state changes are logged; the first logger given wins (one line per process). */
  reportTo(logger: Logger): void {
    this.#logger ??= logger;
  }

  /**
   * REDIS_ANSWER_TIMEOUT_MS for the connections made from now on: their command timeout
   * (queues/connection.ts) and the bound on their liveness pings.
   */
  configure(answerTimeoutMs: number): void {
    this.#answerTimeoutMs = answerTimeoutMs;
  }

  get answerTimeoutMs(): number {
    return this.#answerTimeoutMs;
  }

  /**
   * Follows a client from now until it ends (a deliberate close). Besides its events, a PING every
   * eighth of the bound: a Redis that stops answering but keeps its connections open (SIGSTOP, a
   * partition without resets) raises no event, and only an unanswered ping tells it.
   */
  watch(client: RedisLinkEvents, name: string): void {
    const lost = (error?: unknown) => {
      if (this.#down.has(client)) return;
      this.#down.add(client);
      this.#update(name, error);
    };
    const back = () => {
      if (this.#down.delete(client)) this.#update(name);
    };
    client.on('reconnecting', () => lost());
    client.on('error', (error: unknown) => lost(error));
    client.on('ready', back);
    const pings = client.ping ? this.#pingEvery(client, lost, back) : undefined;
    client.on('end', () => {
      clearInterval(pings);
      back();
    });
  }

  #pingEvery(client: RedisLinkEvents, lost: (error?: unknown) => void, back: () => void): NodeJS.Timeout {
    const boundMs = this.#answerTimeoutMs;
    let inFlight = false;
    const timer = setInterval(
      () => {
        // One ping at a time, and none while the client reconnects: its events tell that.
        if (inFlight || (client.status !== undefined && client.status !== 'ready')) return;
        inFlight = true;
        let answered = false;
        // Judged by the bound alone: a connection whose commands time out sooner (the API's)
        // still counts as down only once Redis leaves a ping unanswered for the whole bound.
        const late = setTimeout(() => {
          inFlight = false;
          if (!answered) lost(Object.assign(new Error('Redis did not answer a ping'), { code: 'ETIMEDOUT' }));
        }, boundMs);
        late.unref();
        client.ping?.().then(
          () => {
            answered = true;
            clearTimeout(late);
            inFlight = false;
            back();
          },
          () => undefined,
        );
      },
      Math.max(50, Math.floor(boundMs / PINGS_PER_BOUND)),
    );
    timer.unref();
    return timer;
  }

  get up(): boolean {
    return this.#state === 'up';
  }

  /**
   * The link as a role's own connections see it. The process's state counts every connection it
   * ever watched; a role judges its own Redis by its own connections, so a connection another part
   * of the process left reconnecting to a Redis that is gone never stops this role's calls.
   */
  of(clients: readonly object[]): RedisLinkView {
    const down = this.#down;
    const link = this;
    const up = () => !clients.some((client) => down.has(client as RedisLinkEvents));
    return {
      get up() {
        return up();
      },
      get answerTimeoutMs() {
        return link.answerTimeoutMs;
      },
      async whenUp() {
        while (!up()) await new Promise((resolve) => setTimeout(resolve, 100));
      },
    };
  }

  /** Resolves once every watched connection answers again (at once while they do). */
  whenUp(): Promise<void> {
    if (this.up) return Promise.resolve();
    return new Promise((resolve) => this.#waiting.push(resolve));
  }

  #update(name: string, error?: unknown): void {
    const next = this.#down.size > 0 ? 'down' : 'up';
    if (next === this.#state) return;
    this.#state = next;
    if (next === 'down') {
      this.#downSinceMs = Date.now();
      const code = (error as NodeJS.ErrnoException | undefined)?.code ?? null;
      this.#logger?.warn(
        { redis: 'down', connection: name, code },
        'redis unreachable: runs wait, /readyz answers 503',
      );
    } else {
      this.#logger?.info({ redis: 'up', down_ms: Date.now() - this.#downSinceMs }, 'redis reachable again');
      for (const resolve of this.#waiting.splice(0)) resolve();
    }
  }
}

/** What a caller reads of the link: whether Redis answers, a wait until it does, the answer bound. */
export interface RedisLinkView {
  readonly up: boolean;
  whenUp(): Promise<void>;
  readonly answerTimeoutMs: number;
}

/** The process's one link state: every connection made by `connectRedis` is watched here. */
export const redisLink = new RedisLink();
