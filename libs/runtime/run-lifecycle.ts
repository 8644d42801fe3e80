import {
  type ProfileRef,
  type RunStatus,
  type RunView,
  runHasEnded,
  runNeedsPage,
} from '../contracts/index.js';
import type { RunEndFigures } from '../telemetry/index.js';
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

/** A profile's line of runs (`ProfileTurns` in the store fits). */
export interface TurnsPort {
  take(
    profile: ProfileRef,
    runId: string,
  ): Promise<{ turn: true } | { turn: false; holderRunId: string; ahead: number }>;
  pass(profile: ProfileRef, runId: string): Promise<string | undefined>;
  first(profile: ProfileRef): Promise<string | undefined>;
  waitForProfile(
    runId: string,
    ownerToken: string,
    behind: { holderRunId: string; ahead: number },
  ): Promise<{ ok: true; run: RunView } | { ok: false; code: string }>;
  wake(runId: string): Promise<{ ok: true; run: RunView } | { ok: false }>;
  /** Whether a line's holder that is no run (a person's sign-in) still holds the page. */
  signInHolds(holderId: string): Promise<boolean>;
  lines(
    cursor?: string,
  ): Promise<{ lines: Array<{ profile: ProfileRef; firstRunId: string | undefined }>; cursor: string }>;
}

/** The index of executions that may owe a follow-up (`FollowUpIndex` in the store fits). */
export interface FollowUpsPort {
  owe(runId: string, execution: number, dueAtMs: number): Promise<void>;
  settle(runId: string, execution: number): Promise<void>;
  postpone(owed: { runId: string; execution: number }, dueAtMs: number): Promise<void>;
  due(nowMs: number, count: number): Promise<Array<{ runId: string; execution: number }>>;
}

/**
 * Being told: the tenant's webhooks hear of a run's end and of the approvals a parked
 * run waits on (`WebhookTeller` fits). Told from every follow-up, so at least once; each event is
 * delivered once (its job id).
 */
export interface WebhookPort {
  runEnded(run: RunView): Promise<void>;
  runParked(run: RunView): Promise<void>;
}

/** How long after a transition the sweeper looks at a follow-up nobody carried out. */
export const FOLLOW_UP_GRACE_MS = 60_000;

/** What a claimed run does next: go on, or wait its turn (its execution ends here). */
export type TurnOutcome = 'go' | 'waiting' | 'lost';

export interface RunLifecycleDeps {
  store: LifecycleStore;
  /** The profiles' lines; absent, runs of one profile are not lined up (a newcomer is refused). */
  turns?: TurnsPort | undefined;
  /** Adds a queued run's current execution to the runs queue (idempotent by job id). */
  enqueue(run: RunView): Promise<unknown>;
  /** Closes a run's lease on the data plane; absent where browser tools are off. */
  release?: LeaseReleaseDeps | undefined;
  /** Where executions that may owe a follow-up are noted; absent, a crash may lose one. */
  followUps?: FollowUpsPort | undefined;
  /** Epoch ms (tests move it). */
  clock?: () => number;
  /**
   * Counts an end once, where it was caused (`leasehold_runs_ended_total`), with the run's time
   * from submission (`leasehold_run_duration_seconds`).
   */
  runEnded?(end: RunEndFigures): void;
  /** Reports a consequence that failed; a later pass (upkeep, sweeper) carries it out again. */
  onError?(runId: string, error: unknown, what: string): void;
  /** Tells the tenant's webhooks; absent, nobody is told. */
  webhooks?: WebhookPort | undefined;
}

/** What a transition caused: who ended the run counts its end. */
export interface TransitionCause {
  /** True when this caller's transition ended the run (it counts the end once). */
  ended?: boolean;
}

/**
 * One lifecycle: every consequence of a run's transition — lease release, the child it
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
    if (cause.ended && runHasEnded(run.status))
      this.#deps.runEnded?.({
        status: run.status,
        code: run.error?.code ?? null,
        submittedAtMs: run.created_at_ms,
        endedAtMs: run.ended_at_ms,
      });
    if (run.status === 'queued') {
      // A run waiting its turn has no job: the run that passes the turn wakes it.
      if (run.waiting_for !== 'profile') await this.#deps.enqueue(run);
      return;
    }
    if (!runNeedsPage(run.status)) {
      // ADR-0127 d4: done with the page; its lease is closed before the next run is woken.
      await this.#releaseLease(run);
      await this.#passTurn(run);
    }
    if (runHasEnded(run.status)) {
      if (run.status === 'cancelled' && run.waiting_on_run_id)
        await this.cancel(run.tenant, run.waiting_on_run_id, 'its parent run was cancelled');
      await resumeParentOf({ store: this.#deps.store, enqueue: this.#deps.enqueue }, run);
    }
    // A telling that failed leaves the follow-up owed: the sweeper tells it again.
    const told = await this.#tell(run);
    if (told && run.status !== 'running' && run.status !== 'parked')
      await this.#deps.followUps?.settle(run.id, run.execution);
  }

  /** Tells the webhooks what `run`'s state calls for (an end, a park); false when that failed. */
  async #tell(run: RunView): Promise<boolean> {
    const webhooks = this.#deps.webhooks;
    if (!webhooks) return true;
    try {
      if (runHasEnded(run.status)) await webhooks.runEnded(run);
      else if (run.status === 'parked') await webhooks.runParked(run);
      return true;
    } catch (error) {
      this.#deps.onError?.(run.id, error, 'telling the webhooks failed; the sweeper tells them again');
      return false;
    }
  }

  /**
   * Notes, before a transition, that this execution of the run may owe a follow-up: a process that
   * dies between the transition and its follow-up leaves it to the sweeper ({@link sweepFollowUps}).
   */
  async owe(run: Pick<RunView, 'id' | 'execution'>): Promise<void> {
    await this.#deps.followUps?.owe(run.id, run.execution, this.#now() + FOLLOW_UP_GRACE_MS);
  }

  /**
   * The sweeper's part: carries out the follow-ups due (their process died, or has not come back
   * to them); a run still running or parked is looked at again later. Answers how many it did.
   */
  async sweepFollowUps(batchSize = 200): Promise<number> {
    const followUps = this.#deps.followUps;
    if (!followUps) return 0;
    let done = 0;
    for (const owed of await followUps.due(this.#now(), batchSize)) {
      const run = await this.#deps.store.getRun(owed.runId);
      if (run && run.execution === owed.execution && (run.status === 'running' || run.status === 'parked')) {
        // A parked run's approvals are told again (once each by their job ids): its worker may
        // have died between the park and its follow-up.
        if (run.status === 'parked') await this.#tell(run);
        await followUps.postpone(owed, this.#now() + FOLLOW_UP_GRACE_MS);
        continue;
      }
      // A run gone, or moved on to a later execution (whose claim noted its own), owes nothing here.
      if (run && run.execution === owed.execution) {
        await this.followUp(run);
        done += 1;
      }
      await followUps.settle(owed.runId, owed.execution);
    }
    return done;
  }

  #now(): number {
    return (this.#deps.clock ?? Date.now)();
  }

  /**
   * Cancels a run (DESIGN §4.7): one that was not running ends now and its consequences follow
   * in this same call; a running run is flagged and its worker ends it.
   */
  async cancel(tenant: string, runId: string, message = 'cancelled by request') {
    const before = await this.#deps.store.getRun(runId, tenant);
    if (before && !runHasEnded(before.status) && before.status !== 'running') await this.owe(before);
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

  /**
   * Runs wait their turn for a profile: a claimed run of a profile-bound session takes
   * its place in the profile's line; behind another run it waits `queued` (`waiting_for:
   * "profile"`) and its execution ends. After waiting it looks again: a turn passed between its
   * place and its wait would otherwise wake nobody.
   */
  async takeTurn(run: RunView, ownerToken: string): Promise<TurnOutcome> {
    const turns = this.#deps.turns;
    const profile = profileOf(run);
    if (!turns || !profile) return 'go';
    let verdict = await turns.take(profile, run.id);
    // A holder already done with the page whose follow-up was lost (its process died, or it was
    // ended outside the lifecycle) is followed up here, so a claim never waits on a finished run.
    for (let looks = 0; !verdict.turn && looks < MAX_STALE_HOLDERS; looks += 1) {
      const holder = await this.#deps.store.getRun(verdict.holderRunId);
      if (holder && runNeedsPage(holder.status)) break;
      if (holder) await this.followUp(holder);
      else if (await turns.signInHolds(verdict.holderRunId)) break;
      else await turns.pass(profile, verdict.holderRunId);
      verdict = await turns.take(profile, run.id);
    }
    if (verdict.turn) return 'go';
    const waited = await turns.waitForProfile(run.id, ownerToken, verdict);
    if (!waited.ok) return waited.code === 'cancel_requested' ? 'go' : 'lost';
    if ((await turns.first(profile)) === run.id) await this.#wake(run.id);
    return 'waiting';
  }

  /**
   * The sweep's look at the profiles' lines (at least once, after a crash between a turn passed
   * and the next run woken): a first run done with the page passes the turn, a first run still
   * waiting is woken. Answers the cursor of the next page ('0' when the walk is done).
   */
  async sweepTurns(cursor = '0'): Promise<{ cursor: string; woken: number }> {
    const turns = this.#deps.turns;
    if (!turns) return { cursor: '0', woken: 0 };
    const page = await turns.lines(cursor);
    let woken = 0;
    for (const { profile, firstRunId } of page.lines) {
      if (!firstRunId) continue;
      const run = await this.#deps.store.getRun(firstRunId);
      if (!run) {
        // A person's sign-in holds the turn while it is open; one left behind passes it on.
        if (await turns.signInHolds(firstRunId)) continue;
        const next = await turns.pass(profile, firstRunId);
        if (next && (await this.#wake(next))) woken += 1;
      } else if (run.status === 'queued' && run.waiting_for === 'profile') {
        if (await this.#wake(run.id)) woken += 1;
      } else if (!runNeedsPage(run.status)) {
        await this.followUp(run);
      }
    }
    return { cursor: page.cursor, woken };
  }

  /**
   * ADR-0127 d7: whether the holder of a profile's page still needs it — a run by its status, a
   * person's sign-in while it is open — so no newcomer replaces it.
   */
  async holderNeedsPage(holderId: string): Promise<boolean> {
    const run = await this.#deps.store.getRun(holderId);
    if (run) return runNeedsPage(run.status);
    return (await this.#deps.turns?.signInHolds(holderId)) ?? false;
  }

  /** A holder that is no run (a sign-in that ended) leaves its profile's line; the next run is woken. */
  async passTurnOf(profile: ProfileRef, holderId: string): Promise<void> {
    const first = await this.#deps.turns?.pass(profile, holderId);
    if (first) await this.#wake(first);
  }

  async #passTurn(run: RunView): Promise<void> {
    const turns = this.#deps.turns;
    const profile = profileOf(run);
    if (!turns || !profile) return;
    const first = await turns.pass(profile, run.id);
    if (first) await this.#wake(first);
  }

  /** Wakes a run waiting its turn and enqueues its new execution; false when it was not waiting. */
  async #wake(runId: string): Promise<boolean> {
    const woken = await this.#deps.turns?.wake(runId);
    if (!woken?.ok) return false;
    await this.#deps.enqueue(woken.run);
    return true;
  }

  async #releaseLease(run: RunView): Promise<void> {
    if (!this.#deps.release) return;
    await releaseRunLease(this.#deps.release, run).catch((error: unknown) =>
      this.#deps.onError?.(run.id, error, 'lease release failed; the upkeep closes it on its next pass'),
    );
  }
}

/** How many finished holders a claim follows up before it waits behind the next one. */
const MAX_STALE_HOLDERS = 3;

/** The profile a run's session is bound to (a session's profile is of its own tenant, DESIGN §3). */
function profileOf(run: RunView): ProfileRef | undefined {
  return run.browser_profile_id ? { tenant: run.tenant, id: run.browser_profile_id } : undefined;
}
