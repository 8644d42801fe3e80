/** What a worker may do next with a job whose lock it holds, as its lock's known state allows. */
export type LockVerdict = 'dispatch' | 'wait' | 'stop';

export interface LockState {
  /**
   * When the lock was last surely set: when the claim or the last renewal Redis accepted was sent
   * (the lock was set after that, so it lasts at least a whole lock from then).
   */
  confirmedAtMs: number;
  /** Renewals that failed (no answer in the bound) since then. */
  failures: number;
  /** Redis answered that the lock is another's or gone. */
  lost: boolean;
}

/**
 * The lock-risk rule of a run worker (pure). A lock surely set at `confirmedAtMs` lasts at least
 * until `confirmedAtMs + lockDurationMs`. A call is dispatched only with more than a margin of
 * that left — one answer bound, at most a quarter lock — so its `dispatched` mark lands while the
 * lock holds; with less left the renewal is due (BullMQ renews at half the lock): wait for it.
 * Once a renewal failed, the next attempt comes a quarter to half a lock later, when the lock may
 * have lapsed: stop, as when Redis is away or said the lock is lost.
 */
export function lockVerdict(
  state: LockState,
  nowMs: number,
  limits: { lockDurationMs: number; answerBoundMs: number; redisUp: boolean },
): LockVerdict {
  if (state.lost || !limits.redisUp || state.failures > 0) return 'stop';
  const remainingMs = state.confirmedAtMs + limits.lockDurationMs - nowMs;
  if (remainingMs > Math.min(limits.answerBoundMs, limits.lockDurationMs / 4)) return 'dispatch';
  return remainingMs > 0 ? 'wait' : 'stop';
}

/**
 * The job locks a worker holds, as its renewals went (`createQueueWorker` reports each renewal
 * call: sent when, which ids Redis refused, or no answer); {@link lockVerdict} judges each.
 */
export class JobLocks {
  readonly #locks = new Map<string, LockState>();

  constructor(
    readonly lockDurationMs: number,
    readonly clock: () => number = Date.now,
  ) {}

  /** A job claimed by a fetch sent at `sentAtMs` (BullMQ's `processedOn`). */
  claimed(jobId: string, sentAtMs = this.clock()): void {
    this.#locks.set(jobId, { confirmedAtMs: sentAtMs, failures: 0, lost: false });
  }

  released(jobId: string): void {
    this.#locks.delete(jobId);
  }

  /** Locks Redis renewed, by a renewal sent at `sentAtMs`. */
  renewed(jobIds: readonly string[], sentAtMs: number): void {
    for (const id of jobIds) {
      const lock = this.#locks.get(id);
      if (lock && !lock.lost) this.#locks.set(id, { confirmedAtMs: sentAtMs, failures: 0, lost: false });
    }
  }

  /** Renewals that got no answer. */
  renewalFailed(jobIds: readonly string[]): void {
    for (const id of jobIds) {
      const lock = this.#locks.get(id);
      if (lock) this.#locks.set(id, { ...lock, failures: lock.failures + 1 });
    }
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
