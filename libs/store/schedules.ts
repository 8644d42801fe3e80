import {
  newId,
  SCHEDULE_FIRE_OUTCOMES,
  type ScheduleFireOutcome,
  type ScheduleSpec,
  scheduleSpecSchema,
} from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { type ScriptCommands, withScripts } from './scripts.js';
import { slotBatch } from './slot-batch.js';

/** Who made a schedule: its fires run as this principal, and pause when this key is revoked. */
export interface ScheduleMaker {
  tenant: string;
  principal: string;
  keyId: string;
}

export type SchedulePauseReason = 'requested' | 'key_revoked' | 'session_gone';

/** A schedule as stored: its maker, the caller's spec, and what its fires have come to. */
export interface ScheduleRecord extends ScheduleMaker {
  id: string;
  createdAtMs: number;
  spec: ScheduleSpec;
  pausedReason: SchedulePauseReason | null;
  lastRunId: string | null;
  heldDueMs: number | null;
  counts: Record<ScheduleFireOutcome, number>;
}

/** The runs a schedule lists, newest due times (older runs keep their records until retention). */
const RUNS_LISTED = 10_000;

/** How long a due time's decision is remembered: past any clock change or hand-over that could repeat it. */
const DECISIONS_KEPT_MS = 7 * 24 * 3_600_000;

/**
 * Schedules in Redis. One schedule's keys share the hash tag `{sch:ID}`: the record (hash), the
 * decisions of its due times (sorted set) and its runs (sorted set by due time); the tenant's index
 * lists its schedules by creation.
 */
export class ScheduleStore {
  readonly #redis: RedisClient & ScriptCommands;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#redis = withScripts(redis);
  }

  #record(id: string): string {
    return `${this.prefix}{sch:${id}}:schedule`;
  }
  #fires(id: string): string {
    return `${this.prefix}{sch:${id}}:fires`;
  }
  #runs(id: string): string {
    return `${this.prefix}{sch:${id}}:runs`;
  }
  #tenantIndex(tenant: string): string {
    return `${this.prefix}{ten:${tenant}}:schedules`;
  }

  async create(maker: ScheduleMaker, spec: ScheduleSpec): Promise<ScheduleRecord> {
    const id = newId('sch');
    const createdAtMs = this.now();
    // Indexed first: an index entry whose record never came lists nothing.
    await this.#redis.zadd(this.#tenantIndex(maker.tenant), createdAtMs, id);
    await this.#redis.hset(this.#record(id), {
      id,
      tenant: maker.tenant,
      principal: maker.principal,
      key_id: maker.keyId,
      created_at: createdAtMs,
      spec: JSON.stringify(spec),
      paused_reason: '',
      last_run_id: '',
    });
    const record = await this.get(maker.tenant, id);
    if (!record) throw new Error(`schedule ${id} was not stored`);
    return record;
  }

  /** The schedule, or undefined when it is absent or another tenant's (`tenant` undefined: any). */
  async get(tenant: string | undefined, id: string): Promise<ScheduleRecord | undefined> {
    return parseRecord(await this.#redis.hgetall(this.#record(id)), tenant);
  }

  /** Which of `ids` are schedules that still exist (one pipelined round trip). */
  async existing(ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const batch = slotBatch(this.#redis);
    for (const id of ids) batch.exists(this.#record(id));
    const replies = (await batch.exec()) ?? [];
    return new Set(
      ids.filter((_id, index) => {
        const [error, exists] = replies[index] ?? [null, 0];
        if (error) throw error;
        return exists === 1;
      }),
    );
  }

  async list(tenant: string): Promise<ScheduleRecord[]> {
    const ids = await this.#redis.zrange(this.#tenantIndex(tenant), 0, -1);
    const records = await Promise.all(ids.map((id) => this.get(tenant, id)));
    return records.filter((record): record is ScheduleRecord => record !== undefined);
  }

  /** Replaces the spec (the caller merged and checked it). */
  async putSpec(id: string, spec: ScheduleSpec): Promise<void> {
    await this.#redis.hset(this.#record(id), 'spec', JSON.stringify(spec));
  }

  async setPaused(id: string, reason: SchedulePauseReason | null): Promise<void> {
    if ((await this.#redis.exists(this.#record(id))) === 0) return;
    await this.#redis.hset(this.#record(id), 'paused_reason', reason ?? '');
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    if (!(await this.get(tenant, id))) return false;
    await this.#redis.del(this.#record(id), this.#fires(id), this.#runs(id));
    await this.#redis.zrem(this.#tenantIndex(tenant), id);
    return true;
  }

  /** Whether a due time's decision was made already (a repeated fire does nothing). */
  async decided(id: string, dueKey: string): Promise<boolean> {
    return (await this.#redis.zscore(this.#fires(id), dueKey)) !== null;
  }

  /**
   * Records a due time's outcome, and `missedBefore` due times missed ahead of it, once: `false`
   * when that due time was decided before (nothing is counted again) or the schedule is gone.
   */
  async decide(
    id: string,
    fire: { dueKey: string; outcome: ScheduleFireOutcome; missedBefore: number },
  ): Promise<boolean> {
    const nowMs = this.now();
    const answer = await this.#redis.decideScheduleFire(
      this.#record(id),
      this.#fires(id),
      fire.dueKey,
      nowMs,
      fire.outcome,
      fire.missedBefore,
      nowMs - DECISIONS_KEPT_MS,
    );
    return answer === 1;
  }

  /** The run a due time submitted: the schedule's latest, and listed by its due time. */
  async noteRun(id: string, runId: string, dueMs: number): Promise<void> {
    await this.#redis.zadd(this.#runs(id), dueMs, runId);
    await this.#redis.zremrangebyrank(this.#runs(id), 0, -(RUNS_LISTED + 1));
    await this.#redis.hset(this.#record(id), 'last_run_id', runId);
  }

  /** The schedule's runs due in [fromMs, toMs], newest first. */
  async runIds(id: string, fromMs = 0, toMs = Number.MAX_SAFE_INTEGER): Promise<string[]> {
    return this.#redis.zrevrangebyscore(this.#runs(id), toMs, fromMs);
  }

  /** Holds a due time until the previous run ends; false when one is held already (at most one). */
  async hold(id: string, dueMs: number): Promise<boolean> {
    return (await this.#redis.hsetnx(this.#record(id), 'held_due_ms', dueMs)) === 1;
  }

  async release(id: string): Promise<void> {
    await this.#redis.hdel(this.#record(id), 'held_due_ms');
  }
}

function parseRecord(fields: Record<string, string>, tenant: string | undefined): ScheduleRecord | undefined {
  if (!fields.id || !fields.spec || !fields.tenant) return undefined;
  if (tenant !== undefined && fields.tenant !== tenant) return undefined;
  const counts = Object.fromEntries(
    SCHEDULE_FIRE_OUTCOMES.map((outcome) => [outcome, Number(fields[`n_${outcome}`] ?? 0)]),
  ) as Record<ScheduleFireOutcome, number>;
  const reason = fields.paused_reason;
  return {
    id: fields.id,
    tenant: fields.tenant,
    principal: fields.principal ?? '',
    keyId: fields.key_id ?? '',
    createdAtMs: Number(fields.created_at ?? 0),
    spec: scheduleSpecSchema.parse(JSON.parse(fields.spec)),
    pausedReason:
      reason === 'requested' || reason === 'key_revoked' || reason === 'session_gone' ? reason : null,
    lastRunId: fields.last_run_id || null,
    heldDueMs: fields.held_due_ms ? Number(fields.held_due_ms) : null,
    counts,
  };
}
