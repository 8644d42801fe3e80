import type { ProfileRef } from '../contracts/index.js';
import type { LeaseRecord } from '../lease/ports.js';
import { profileLabel, type RedisLeaseStore, refFromLabel } from './lease-store.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/**
 * Run workers alive, by heartbeat (ADR-0127 d6: leases live in the run worker that ran their runs).
 * Each record lives `ttlMs` unless renewed; the index of ids keeps a worker whose record lapsed,
 * so the sweeper can find the leases it left and hand them on, and forgets it after.
 */
export class RunWorkerRoster {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  /** The records and their index share the hash tag `{run-workers}`: one slot for the pipeline. */
  #key(id: string): string {
    return `${this.prefix}{run-workers}:${id}`;
  }
  #idsKey(): string {
    return `${this.prefix}{run-workers}:ids`;
  }

  /**
   * A pipeline, not a MULTI: each beat is two commands, not four, on every run worker four times a
   * minute. A beat whose SADD is lost is repaired by the next.
   */
  async heartbeat(id: string, nowMs: number, ttlMs: number): Promise<void> {
    const replies = await this.redis
      .pipeline()
      .set(this.#key(id), String(nowMs), 'PX', ttlMs)
      .sadd(this.#idsKey(), id)
      .exec();
    failOnError(replies);
  }

  /** A worker stopping: gone at once, so its parked runs' leases go to a live worker on the next sweep. */
  async leave(id: string): Promise<void> {
    await this.redis.del(this.#key(id));
  }

  /** A gone worker whose leases were handed on: nothing is left to find under its id. */
  async forget(id: string): Promise<void> {
    await this.redis.srem(this.#idsKey(), id);
  }

  /** Every worker known, alive (heartbeat not lapsed) or gone, each in id order. */
  async members(): Promise<{ live: string[]; gone: string[] }> {
    const ids = (await this.redis.smembers(this.#idsKey())).sort();
    if (ids.length === 0) return { live: [], gone: [] };
    const beats = await this.redis.mget(ids.map((id) => this.#key(id)));
    return {
      live: ids.filter((_, index) => beats[index] !== null),
      gone: ids.filter((_, index) => beats[index] === null),
    };
  }
}

/** A lease as the upkeep index names it. */
export interface IndexedLease {
  profile: ProfileRef;
  leaseId: string;
}

/**
 * The leases each run worker keeps up: one hash per worker (lease id → `tenant/profile id`), so a
 * worker's upkeep reads its own leases and never the fleet's. An entry is added when the worker
 * acquires a lease for a run it executes, moved when another worker claims that run (the claim,
 * `RunStore.claimRun`) or when its worker is gone (the sweeper), and pruned when the upkeep finds its
 * lease closed or gone. Every key of a worker's index is in its own slot, apart from the runs' and
 * profiles', so a move is a pipeline of two writes and never one script: an entry briefly in
 * both indexes is renewed by both under one idempotency key, which is one renewal.
 */
export class LeaseUpkeepIndex {
  readonly #keys: RunKeys;

  constructor(
    private readonly redis: RedisClient,
    prefix: string,
    private readonly leases: Pick<RedisLeaseStore, 'readLeases'>,
  ) {
    this.#keys = new RunKeys(prefix);
  }

  /**
   * A lease this worker acquired for `runId`: into its index, and the run's record names it and
   * this worker, so the run's next claim moves it (one pipelined round trip).
   */
  async add(workerId: string, runId: string, lease: IndexedLease): Promise<void> {
    const label = profileLabel(lease.profile);
    failOnError(
      await slotBatch(this.redis)
        .hset(this.#keys.upkeepIndex(workerId), lease.leaseId, label)
        .hset(this.#keys.run(runId), 'upkeep_by', workerId, 'lease_id', lease.leaseId, 'lease_profile', label)
        .exec(),
    );
  }

  /** The entries of a worker's index as written. */
  async entries(workerId: string): Promise<IndexedLease[]> {
    const fields = await this.redis.hgetall(this.#keys.upkeepIndex(workerId));
    return Object.entries(fields).flatMap(([leaseId, label]) => {
      const profile = refFromLabel(label);
      return profile ? [{ profile, leaseId }] : [];
    });
  }

  /**
   * The live leases in a worker's index (two round trips: the index, then the records); an entry
   * whose lease is closed or gone is pruned on the way, so the index only grows with live leases.
   */
  async liveLeasesOf(workerId: string): Promise<LeaseRecord[]> {
    const entries = await this.entries(workerId);
    if (entries.length === 0) return [];
    const records = await this.leases.readLeases(entries);
    const ended = entries.filter((_, index) => records[index]?.state !== 'live');
    if (ended.length > 0)
      await this.redis.hdel(this.#keys.upkeepIndex(workerId), ...ended.map((entry) => entry.leaseId));
    return records.filter((lease): lease is LeaseRecord => lease?.state === 'live');
  }

  /**
   * Moves every entry of `from`'s index into `to`'s; answers how many moved. Read, then written
   * and deleted in one pipeline: `from` is a gone worker, so nothing adds to its index meanwhile.
   */
  async moveAll(from: string, to: string): Promise<number> {
    const fields = await this.redis.hgetall(this.#keys.upkeepIndex(from));
    const entries = Object.entries(fields);
    if (entries.length === 0) return 0;
    failOnError(
      await slotBatch(this.redis)
        .hset(this.#keys.upkeepIndex(to), ...entries.flat())
        .del(this.#keys.upkeepIndex(from))
        .exec(),
    );
    return entries.length;
  }

  /**
   * The leases of `leases` that no worker's index holds, in their order (one pipelined round trip).
   * The run's record is the test, not the indexes: `add` names the lease on it with the index entry
   * and a claim keeps that name, so one read per lease answers, whatever the number of workers and
   * the size of their indexes. A lease whose run has no record is left out: nobody needs its page,
   * it expires by itself, and an `add` would write a record without the run's expiry.
   */
  async unindexed(leases: readonly LeaseRecord[]): Promise<LeaseRecord[]> {
    if (leases.length === 0) return [];
    const runs = slotBatch(this.redis);
    for (const lease of leases) runs.hmget(this.#keys.run(lease.scope.run_id), 'status', 'lease_id');
    const replies = (await runs.exec()) ?? [];
    failOnError(replies);
    return leases.filter((lease, index) => {
      const [status, leaseId] = (replies[index]?.[1] ?? []) as Array<string | null>;
      return Boolean(status) && leaseId !== lease.id;
    });
  }

  /** Whether the one fill of the index is done (`RunKeys.upkeepFilled`). */
  async filled(): Promise<boolean> {
    return (await this.redis.exists(this.#keys.upkeepFilled())) === 1;
  }

  /** The fill is done: no pass reads the fleet's leases again. */
  async markFilled(): Promise<void> {
    await this.redis.set(this.#keys.upkeepFilled(), '1');
  }

  /** A worker's leases as an upkeep of its own would see them: live and due or not. */
  forWorker(workerId: string): { listLiveLeases(): Promise<LeaseRecord[]> } {
    return { listLiveLeases: () => this.liveLeasesOf(workerId) };
  }
}

function failOnError(replies: Array<[Error | null, unknown]> | null): void {
  const failed = replies?.find(([error]) => error !== null);
  if (failed?.[0]) throw failed[0];
}
