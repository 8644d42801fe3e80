import type { Logger } from 'pino';

/** The events of a Redis client the watch listens to (ioredis names them so). */
export interface RedisLinkEvents {
  on(event: 'ready' | 'reconnecting' | 'error' | 'end', listener: (...args: unknown[]) => void): unknown;
}

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
];

/**
 * Whether an error (or one of its causes) says Redis could not be reached (issue 12: the API
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
 * Whether this process's Redis connections answer, and ONE log line per change of that (issue 12):
 * an outage is `redis: "down"` once — not a multi-line `ECONNREFUSED` stack per connection per
 * reconnect attempt — and `redis: "up"` once when every connection is back. Readiness reads it
 * (every role's `/readyz` answers 503 while a connection is down).
 */
export class RedisLink {
  readonly #down = new Set<RedisLinkEvents>();
  #state: 'up' | 'down' = 'up';
  #downSinceMs = 0;
  #logger: Logger | undefined;

  /** Where the state changes are logged; the first logger given wins (one line per process). */
  reportTo(logger: Logger): void {
    this.#logger ??= logger;
  }

  /** Follows a client from now until it ends (a deliberate close). */
  watch(client: RedisLinkEvents, name: string): void {
    const lost = (error?: unknown) => {
      if (this.#down.has(client)) return;
      this.#down.add(client);
      this.#update(name, error);
    };
    client.on('reconnecting', () => lost());
    client.on('error', (error: unknown) => lost(error));
    client.on('ready', () => {
      if (this.#down.delete(client)) this.#update(name);
    });
    client.on('end', () => {
      if (this.#down.delete(client)) this.#update(name);
    });
  }

  get up(): boolean {
    return this.#state === 'up';
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
    }
  }
}

/** The process's one link state: every connection made by `connectRedis` is watched here. */
export const redisLink = new RedisLink();
