import type { Redis } from 'ioredis';

/** What a browser worker tells the run side about itself (DESIGN §5). */
export interface BrowserWorkerRecord {
  id: string;
  url: string;
  pinnedProfiles: '*' | string[];
  heartbeatAtMs: number;
}

/**
 * Browser workers registered in Redis with a heartbeat: each record lives `ttlMs` unless renewed,
 * so a dead worker drops out of the lookup by itself.
 */
export class BrowserWorkerRegistry {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
  ) {}

  #key(id: string): string {
    return `${this.prefix}browser-worker:${id}`;
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
      .sadd(`${this.prefix}browser-workers`, record.id)
      .exec();
  }

  async remove(id: string): Promise<void> {
    await this.redis.multi().del(this.#key(id)).srem(`${this.prefix}browser-workers`, id).exec();
  }

  /** Live workers (heartbeat not lapsed), in id order. */
  async list(): Promise<BrowserWorkerRecord[]> {
    const ids = (await this.redis.smembers(`${this.prefix}browser-workers`)).sort();
    if (ids.length === 0) return [];
    const values = await this.redis.mget(ids.map((id) => this.#key(id)));
    const live: BrowserWorkerRecord[] = [];
    for (const value of values) if (value) live.push(JSON.parse(value) as BrowserWorkerRecord);
    return live;
  }

  /** The live worker serving `profileId`: one that pins it by name first, else one pinning `*`. */
  async findForProfile(profileId: string): Promise<BrowserWorkerRecord | undefined> {
    const workers = await this.list();
    return (
      workers.find((worker) => worker.pinnedProfiles !== '*' && worker.pinnedProfiles.includes(profileId)) ??
      workers.find((worker) => worker.pinnedProfiles === '*')
    );
  }
}
