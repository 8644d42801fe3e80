import { z } from 'zod';
import { type RunJob, type RunsQueue, runJobSchema } from '../../queues/index.js';
import type { RedisClient } from '../store/redis-client.js';

/** Failed jobs looked at per pass by default. */
export const RECLAIM_SCAN_JOBS = 200;
/**
 * How far behind Redis's clock the walk stays by default. A job's place in BullMQ's failed set is
 * the failing worker's clock; a worker whose clock is behind adds a job below jobs already
 * walked past. Walking only jobs failed at least this long ago keeps such a job ahead of the
 * cursor, as long as no clock is off by more.
 */
export const FAILED_JOB_SETTLE_MS = 2_000;

/** A job of the failed set, its data parsed (undefined when it is not a run execution's). */
export interface FailedJob {
  id: string;
  data: RunJob | undefined;
  failedReason: string | undefined;
}

/**
 * Where the walk stands: the failed set's score (the failure time) of the last job walked, and how
 * many jobs at exactly that score were walked (Redis orders equal scores by job id; BullMQ fails
 * a batch of jobs in one millisecond, more than a page of them in a burst).
 */
const cursorSchema = z.object({
  scoreMs: z.number().nullable(),
  seenAtScore: z.number().int().nonnegative(),
});
type Cursor = z.output<typeof cursorSchema>;
const START: Cursor = Object.freeze({ scoreMs: null, seenAtScore: 0 });

export interface FailedJobPage {
  readonly jobs: readonly FailedJob[];
  /** Where the walk stands once this page is handled ({@link FailedJobWalk.commit}). */
  readonly next: Cursor;
}

export interface FailedJobWalkOptions {
  queue: RunsQueue;
  /** A connection to the queue's Redis: the failed set is read and the cursor kept through it. */
  redis: RedisClient;
  /** Where the cursor is kept, so the next leader goes on where the last one stopped. */
  cursorKey: string;
  /**
   * Jobs per page. Default {@link RECLAIM_SCAN_JOBS}. Too small and a burst of failures takes
   * many passes to walk; too large and one pass holds the sweeper lock for long.
   */
  pageSize?: number;
  /** Default {@link FAILED_JOB_SETTLE_MS}; each failure waits this long before it is walked. */
  settleMs?: number;
}

/**
 * Reading the newest failed jobs each pass hid older ones under a burst of newer
 * failures forever, and a failed run's job lands there too now. This walk goes through BullMQ's
 * failed set oldest first, a page per pass, from a cursor kept in Redis, so every failed job is
 * read once, however many fail at once. It never changes the failed set (Bull Board shows it).
 * The cursor moves only when a page is committed: a pass that dies reads its page again.
 */
export class FailedJobWalk {
  readonly #queue: RunsQueue;
  readonly #redis: RedisClient;
  readonly #cursorKey: string;
  readonly #pageSize: number;
  readonly #settleMs: number;

  constructor(options: FailedJobWalkOptions) {
    this.#queue = options.queue;
    this.#redis = options.redis;
    this.#cursorKey = options.cursorKey;
    this.#pageSize = options.pageSize ?? RECLAIM_SCAN_JOBS;
    this.#settleMs = options.settleMs ?? FAILED_JOB_SETTLE_MS;
    if (!Number.isInteger(this.#pageSize) || this.#pageSize < 1)
      throw new RangeError(`pageSize: expected a positive integer, got ${this.#pageSize}`);
    if (!Number.isInteger(this.#settleMs) || this.#settleMs < 0)
      throw new RangeError(`settleMs: expected a non-negative integer, got ${this.#settleMs}`);
  }

  /** The next page of failed jobs after the cursor; empty when the walk has caught up. */
  async read(): Promise<FailedJobPage> {
    const cursor = await this.#cursor();
    const [seconds, micros] = await this.#redis.time();
    const settledUntilMs = Number(seconds) * 1000 + Math.floor(Number(micros) / 1000) - this.#settleMs;
    const reply = await this.#redis.zrangebyscore(
      this.#queue.toKey('failed'),
      cursor.scoreMs === null ? '-inf' : cursor.scoreMs,
      settledUntilMs,
      'WITHSCORES',
      'LIMIT',
      cursor.seenAtScore,
      this.#pageSize,
    );
    const entries: Array<{ id: string; scoreMs: number }> = [];
    for (let i = 0; i + 1 < reply.length; i += 2)
      entries.push({ id: reply[i] as string, scoreMs: Number(reply[i + 1]) });
    const last = entries.at(-1);
    if (!last) return { jobs: [], next: cursor };
    const atLast = entries.filter((entry) => entry.scoreMs === last.scoreMs).length;
    const next: Cursor = {
      scoreMs: last.scoreMs,
      seenAtScore: last.scoreMs === cursor.scoreMs ? cursor.seenAtScore + atLast : atLast,
    };
    const jobs = await Promise.all(entries.map(({ id }) => this.#job(id)));
    return { jobs: jobs.filter((job): job is FailedJob => job !== undefined), next };
  }

  /** Moves the cursor past a page whose jobs were handled. */
  async commit(page: FailedJobPage): Promise<void> {
    await this.#redis.set(this.#cursorKey, JSON.stringify(page.next));
  }

  async #cursor(): Promise<Cursor> {
    const stored = await this.#redis.get(this.#cursorKey);
    if (stored === null) return START;
    try {
      return cursorSchema.parse(JSON.parse(stored));
    } catch {
      // A cursor that cannot be read starts the walk afresh: reading a job twice does no harm.
      return START;
    }
  }

  async #job(id: string): Promise<FailedJob | undefined> {
    // Removed since the page was read (its age passed, an operator): nothing left to reclaim.
    const job = await this.#queue.getJob(id);
    if (!job) return undefined;
    const data = runJobSchema.safeParse(job.data);
    return { id, data: data.success ? data.data : undefined, failedReason: job.failedReason };
  }
}
