import type { RedisClient } from './redis-client.js';

/** One execution of a run whose consequences may still be owed. */
export interface OwedFollowUp {
  runId: string;
  execution: number;
}

/**
 * Consequences done at least once: a run's transition writes only that run's keys (one
 * hash slot), and what follows for other records — a lease to close, a parent to resume, the next
 * run of a profile to wake, a job to add — is carried out by the lifecycle after it. So that a
 * process dying in between loses nothing, an execution is written here (`{lifecycle}:followups`,
 * member `RUN:EXECUTION`, scored by when to look) *before* its transitions, and removed once its
 * follow-up is carried out; the sweeper carries out what is due. An entry for a run still running
 * or parked is only looked at again later.
 */
export class FollowUpIndex {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
  ) {}

  #key(): string {
    return `${this.prefix}{lifecycle}:followups`;
  }

  /** Notes that `execution` of the run may owe a follow-up, to be looked at from `dueAtMs` on. */
  async owe(runId: string, execution: number, dueAtMs: number): Promise<void> {
    await this.redis.zadd(this.#key(), dueAtMs, `${runId}:${execution}`);
  }

  /** The follow-up of `execution` is carried out. */
  async settle(runId: string, execution: number): Promise<void> {
    await this.redis.zrem(this.#key(), `${runId}:${execution}`);
  }

  /** Looks again at an execution later (its run still runs, or is parked). */
  async postpone(owed: OwedFollowUp, dueAtMs: number): Promise<void> {
    await this.redis.zadd(this.#key(), 'XX', dueAtMs, `${owed.runId}:${owed.execution}`);
  }

  /** Up to `count` executions due by `nowMs`, earliest first. */
  async due(nowMs: number, count: number): Promise<OwedFollowUp[]> {
    const members = await this.redis.zrangebyscore(this.#key(), '-inf', nowMs, 'LIMIT', 0, count);
    return members.map((member) => {
      const colon = member.lastIndexOf(':');
      return { runId: member.slice(0, colon), execution: Number(member.slice(colon + 1)) };
    });
  }
}
