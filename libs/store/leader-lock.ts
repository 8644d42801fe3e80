import { randomUUID } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { withScripts } from './scripts.js';

/**
 * One active holder among replicas (the sweeper): the lock lives `ttlMs` and its holder renews
 * it on every pass, so a holder that dies hands over within one TTL.
 */
export class LeaderLock {
  readonly #client: ReturnType<typeof withScripts>;
  readonly #token = randomUUID();
  #held = false;

  constructor(
    client: RedisClient,
    readonly key: string,
    private readonly ttlMs: number,
  ) {
    this.#client = withScripts(client);
  }

  get held(): boolean {
    return this.#held;
  }

  /** Takes the lock or keeps it; false while another replica holds it. */
  async tryHold(): Promise<boolean> {
    this.#held = (await this.#client.acquireOrRenewLock(this.key, this.#token, this.ttlMs)) === 1;
    return this.#held;
  }

  async release(): Promise<void> {
    if (!this.#held) return;
    this.#held = false;
    await this.#client.releaseLock(this.key, this.#token);
  }
}
