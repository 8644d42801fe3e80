/** What a worker may do next with a job whose lock it holds, as its lock's known state allows. */
export type LockVerdict = 'dispatch' | 'wait' | 'stop';

export interface LockState {
  /** When the lock was last known set: the claim, or the answer to its last renewal. */
  confirmedAtMs: number;
  /** Renewals that failed (no answer in the bound, or refused) since then. */
  failures: number;
  /** Redis answered that the lock is another's or gone. */
  lost: boolean;
}

/**
 * The lock-risk rule of a run worker (pure). A lock set at `confirmedAtMs` may have been set as
 * much as one answer bound before its answer arrived, so it lasts at least until
 * `confirmedAtMs - answerBoundMs + lockDurationMs`. A call is dispatched only with more than one
 * answer bound of that left, so its `dispatched` mark lands while the lock holds. With less left
 * and no renewal failed, the renewal is due: wait for it. Once a renewal failed, the next attempt
 * comes half a lock later, past the lapse: stop, as when Redis is away or said the lock is lost.
 */
export function lockVerdict(
  state: LockState,
  nowMs: number,
  limits: { lockDurationMs: number; answerBoundMs: number; redisUp: boolean },
): LockVerdict {
  if (state.lost || !limits.redisUp) return 'stop';
  const remainingMs = state.confirmedAtMs - limits.answerBoundMs + limits.lockDurationMs - nowMs;
  if (remainingMs > limits.answerBoundMs && state.failures === 0) return 'dispatch';
  if (state.failures > 0 || remainingMs <= 0) return 'stop';
  return 'wait';
}

/**
 * The job locks a worker holds, as BullMQ's renewals report them (`locksRenewed`,
 * `lockRenewalFailed`, an `error` of the renewal itself); {@link lockVerdict} judges each.
 */
export class JobLocks {
  readonly #locks = new Map<string, LockState>();

  constructor(
    readonly lockDurationMs: number,
    readonly clock: () => number = Date.now,
  ) {}

  claimed(jobId: string): void {
    this.#locks.set(jobId, { confirmedAtMs: this.clock(), failures: 0, lost: false });
  }

  released(jobId: string): void {
    this.#locks.delete(jobId);
  }

  renewed(jobIds: readonly string[]): void {
    const now = this.clock();
    for (const id of jobIds) {
      const lock = this.#locks.get(id);
      if (lock && !lock.lost) this.#locks.set(id, { confirmedAtMs: now, failures: 0, lost: false });
    }
  }

  /** Renewals that got no answer; without ids, every lock held (one call renewed them all). */
  renewalFailed(jobIds?: readonly string[]): void {
    for (const [id, lock] of this.#locks)
      if (!jobIds || jobIds.includes(id)) this.#locks.set(id, { ...lock, failures: lock.failures + 1 });
  }

  lost(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      const lock = this.#locks.get(id);
      if (lock) this.#locks.set(id, { ...lock, lost: true });
    }
  }

  verdict(jobId: string, limits: { answerBoundMs: number; redisUp: boolean }): LockVerdict {
    const lock = this.#locks.get(jobId);
    if (!lock) return 'stop';
    return lockVerdict(lock, this.clock(), { lockDurationMs: this.lockDurationMs, ...limits });
  }
}
