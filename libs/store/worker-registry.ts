import { type ProfileRef, pinRank } from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';

/** What a browser worker tells the run side about itself (DESIGN §5). */
export interface BrowserWorkerRecord {
  id: string;
  url: string;
  /** `*`, or pins `tenant/id` and `tenant/*` (profile ids are unique within a tenant only). */
  pinnedProfiles: '*' | string[];
  heartbeatAtMs: number;
}

/**
 * Browser workers registered in Redis with a heartbeat: each record lives `ttlMs` unless renewed,
 * so a dead worker drops out of the lookup by itself.
 */
export class BrowserWorkerRegistry {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  /**
   * The records and their index share the hash tag `{browser-workers}`, so the MULTI
   * that writes both and the MGET that reads the records each stay in one Redis Cluster slot.
   */
  #key(id: string): string {
    return `${this.prefix}{browser-workers}:${id}`;
  }
  #idsKey(): string {
    return `${this.prefix}{browser-workers}:ids`;
  }

  async heartbeat(
    record: Omit<BrowserWorkerRecord, 'heartbeatAtMs'>,
    nowMs: number,
    ttlMs: number,
  ): Promise<void> {
    await this.redis
      .multi()
      .set(
        this.#key(record.id),
        JSON.stringify({ ...record, heartbeatAtMs: nowMs } satisfies BrowserWorkerRecord),
        'PX',
        ttlMs,
      )
      .sadd(this.#idsKey(), record.id)
      .exec();
  }

  async remove(id: string): Promise<void> {
    await this.redis.multi().del(this.#key(id)).srem(this.#idsKey(), id).exec();
  }

  /** Live workers (heartbeat not lapsed), in id order. */
  async list(): Promise<BrowserWorkerRecord[]> {
    const ids = (await this.redis.smembers(this.#idsKey())).sort();
    if (ids.length === 0) return [];
    const values = await this.redis.mget(ids.map((id) => this.#key(id)));
    const live: BrowserWorkerRecord[] = [];
    for (const value of values) if (value) live.push(JSON.parse(value) as BrowserWorkerRecord);
    return live;
  }

  /**
   * The live worker serving `profile`: one that pins it by `tenant/id` first, then one pinning its
   * tenant's `tenant/*`, else one pinning `*`; in id order among equals.
   */
  async findForProfile(profile: ProfileRef): Promise<BrowserWorkerRecord | undefined> {
    let best: BrowserWorkerRecord | undefined;
    let bestRank = 0;
    for (const worker of await this.list()) {
      const rank = pinRank(worker.pinnedProfiles, profile);
      if (rank > bestRank) {
        best = worker;
        bestRank = rank;
      }
    }
    return best;
  }
}
