import { type RunStatus, type RunView, runHasEnded } from '../contracts/index.js';
import { type ParentResumeDeps, resumeParentOf } from './delegation.js';
import { type LeaseReleaseDeps, releaseRunLease } from './lease-release.js';

/** The run store calls the lifecycle makes (the run store fits). */
export interface LifecycleStore extends Pick<ParentResumeDeps['store'], 'requeueRun'> {
  getRun(runId: string, tenant?: string): Promise<RunView | undefined>;
  cancelRun(
    tenant: string,
    runId: string,
    message?: string,
  ): Promise<
    | { ok: true; detail: 'cancelled' | 'cancel_requested'; run: RunView }
    | { ok: false; code: string; status: RunStatus | undefined; message: string }
  >;
}

export interface RunLifecycleDeps {
  store: LifecycleStore;
  /** Adds a queued run's current execution to the runs queue (idempotent by job id). */
  enqueue(run: RunView): Promise<unknown>;
  /** Closes a run's lease on the data plane; absent where browser tools are off. */
  release?: LeaseReleaseDeps | undefined;
  /** Counts an end once, where it was caused (`leasehold_runs_ended_total`). */
  runEnded?(status: string, code: string | null, count?: number): void;
  /** Reports a consequence that failed; a later pass (upkeep, sweeper) carries it out again. */
  onError?(runId: string, error: unknown, what: string): void;
}

/** What a transition caused: who ended the run counts its end. */
export interface TransitionCause {
  /** True when this caller's transition ended the run (it counts the end once). */
  ended?: boolean;
}

/**
 * Issue 12, one lifecycle: every consequence of a run's transition — lease release, the child it
 * waited on cancelled, the parent waiting on it resumed, the next execution enqueued, the end
 * counted — is derived here, from the run as the transition left it, and nowhere else. The API, the
 * sweeper and the workers call it alike; each consequence is idempotent, so a caller that
 * carries one out again (a sweep after a crash) does no harm.
 */
export class RunLifecycle {
  readonly #deps: RunLifecycleDeps;

  constructor(deps: RunLifecycleDeps) {
    this.#deps = deps;
  }

  /** Carries out what follows `run`'s current state (as the transition that moved it left it). */
  async followUp(run: RunView, cause: TransitionCause = {}): Promise<void> {
    if (cause.ended && runHasEnded(run.status)) this.#deps.runEnded?.(run.status, run.error?.code ?? null);
    if (run.status === 'queued') {
      await this.#deps.enqueue(run);
      return;
    }
    if (runHasEnded(run.status) || run.status === 'waiting_user' || run.status === 'waiting_child')
      await this.#releaseLease(run);
    if (!runHasEnded(run.status)) return;
    if (run.status === 'cancelled' && run.waiting_on_run_id)
      await this.cancel(run.tenant, run.waiting_on_run_id, 'its parent run was cancelled');
    await resumeParentOf({ store: this.#deps.store, enqueue: this.#deps.enqueue }, run);
  }

  /**
   * Cancels a run (DESIGN §4.7): one that was not running ends now and its consequences follow
   * in this same call; a running run is flagged and its worker ends it.
   */
  async cancel(tenant: string, runId: string, message = 'cancelled by request') {
    const outcome = await this.#deps.store.cancelRun(tenant, runId, message);
    if (outcome.ok && outcome.detail === 'cancelled') await this.followUp(outcome.run, { ended: true });
    return outcome;
  }

  /** Reads the run and carries out what follows its state (after a decision, a sweep, a refusal). */
  async followUpById(runId: string, cause: TransitionCause = {}): Promise<RunView | undefined> {
    const run = await this.#deps.store.getRun(runId);
    if (run) await this.followUp(run, cause);
    return run;
  }

  async #releaseLease(run: RunView): Promise<void> {
    if (!this.#deps.release) return;
    await releaseRunLease(this.#deps.release, run).catch((error: unknown) =>
      this.#deps.onError?.(run.id, error, 'lease release failed; the upkeep closes it on its next pass'),
    );
  }
}
