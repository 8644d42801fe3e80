import { randomUUID } from 'node:crypto';
import { uploadArtifactRef } from '../artifacts/index.js';
import {
  BrowserToolError,
  NavigationFailedError,
  type OperationLimits,
  type UploadPayload,
  within,
} from '../browser/index.js';
import {
  type HandoverAnswer,
  type LeaseCloseReason,
  type LeaseView,
  type OpenedSecret,
  type ProfileRef,
  runSecretsLabel,
  runSecretsSchema,
} from '../contracts/index.js';
import type { LeaseMetrics } from '../telemetry/index.js';
import { isRedisUnreachable, type RedisLinkView } from '../telemetry/redis-link.js';
import { DataPlaneError } from './errors.js';
import { type HandoverVerdict, judgeHandedOverCall } from './handover.js';
import { type HeldLease, personHolds } from './held-lease.js';
import { LeaseDownloads } from './lease-downloads.js';
import { readLeaseView } from './lease-views.js';
import { type LeaseArtifacts, LeaseScreenshots } from './page-artifacts.js';
import type { PageResult, PageSession } from './pages.js';
import type { LeaseRecord, LeaseStore } from './ports.js';
import { type SealKeys, unsealState } from './seal.js';
import { toldRefusal } from './told-refusal.js';

/** What the page routes share with the lease service that owns them. */
export interface LeasePageCallsDeps {
  store: LeaseStore;
  /** This browser worker's id: the provider reference of every lease it serves. */
  workerId: string;
  clock: () => number;
  metrics: LeaseMetrics;
  /** The leases whose contexts this process holds: the service's own map, read here. */
  held: ReadonlyMap<string, HeldLease>;
  /** The service's close: a lease found past its expiry is closed, unsealed, before the refusal. */
  close: (
    profile: ProfileRef,
    leaseId: string,
    options: { seal: boolean; reason?: LeaseCloseReason },
  ) => Promise<LeaseView>;
  /** Where screenshots go; without it, calls answer none. */
  artifacts?: LeaseArtifacts | undefined;
  /** DESIGN §12: opens the declared secrets of the runs the leases serve (AES-256-GCM). */
  sealKeys?: SealKeys | undefined;
  /** Whether the store's Redis answers: what a call that met an outage waits on. */
  redisLink: RedisLinkView;
}

/** Work a call leaves for right after its answer, before the lease's next call (its screenshot). */
type Later = (work: () => Promise<void>) => void;

/**
 * The page routes of a held lease (DESIGN §5): navigate and act are effects fenced by the action
 * sequence, observe is not; calls on one lease run one at a time, so sequence checks and effects
 * never interleave.
 */
export class LeasePageCalls {
  readonly #deps: LeasePageCallsDeps;
  readonly #shots: LeaseScreenshots | undefined;
  readonly #downloads: LeaseDownloads | undefined;

  constructor(deps: LeasePageCallsDeps) {
    this.#deps = deps;
    this.#shots = deps.artifacts ? new LeaseScreenshots(deps.artifacts) : undefined;
    this.#downloads = deps.artifacts?.files ? new LeaseDownloads(deps.artifacts.files) : undefined;
  }

  /** Resolves once every screenshot named so far is stored or noted failed. */
  screenshotsDrained(): Promise<void> {
    return this.#shots?.drained() ?? Promise.resolve();
  }

  /**
   * Resolves once what the lease's answered calls left for after their answer is done: a run
   * releases its lease as soon as its last act answered, and that act's screenshot is still to be
   * taken. A call still under way is not waited for (the close ends it `lease_expired`). Bounded by
   * two captures' time (a failed one is tried once more) and a second, so a wedged page cannot
   * hold a close.
   */
  async afterAnswersDone(held: HeldLease): Promise<void> {
    if (!held.afterAnswer) return;
    const boundMs = 2 * (this.#deps.artifacts?.captureTimeoutMs ?? 0) + 1_000;
    await within(held.afterAnswer, Date.now() + boundMs);
  }

  navigate(profile: ProfileRef, leaseId: string, sequence: number, url: string, limits: OperationLimits) {
    return this.#effect(profile, leaseId, sequence, limits.deadlineMs, (session, beforeDispatch) =>
      session.navigate(url, limits, beforeDispatch),
    );
  }

  act(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    args: Record<string, unknown>,
    limits: OperationLimits,
  ) {
    return this.#effect(
      profile,
      leaseId,
      sequence,
      limits.deadlineMs,
      async (session, beforeDispatch, lease) =>
        session.act(args, limits, beforeDispatch, await this.#uploadFor(args, lease)),
    );
  }

  /**
   * DESIGN §12: the file an `upload` act names, with its bytes, when the input of the run the
   * lease serves lists it; refused before dispatch otherwise (the sequence does not move). The run
   * side's word is not taken for it: the run's own record says which files are its.
   */
  async #uploadFor(args: Record<string, unknown>, lease: LeaseRecord): Promise<UploadPayload | undefined> {
    if (args.action !== 'upload' || typeof args.file !== 'string') return undefined;
    const fileId = args.file;
    const { tenant, run_id: runId } = lease.scope;
    const record = await this.#deps.store.runUpload?.(runId, tenant, fileId);
    const stored = record
      ? await this.#deps.artifacts?.store.get(uploadArtifactRef(tenant, fileId))
      : undefined;
    if (!record || !stored)
      throw new BrowserToolError('invalid_arguments', `file ${fileId} is not among the run's files`);
    return {
      id: fileId,
      name: record.name,
      mimeType: record.content_type,
      buffer: Buffer.from(stored.bytes.buffer, stored.bytes.byteOffset, stored.bytes.byteLength),
    };
  }

  observe(profile: ProfileRef, leaseId: string, args: Record<string, unknown>, limits: OperationLimits) {
    return this.#serially(profile, leaseId, async (session) => {
      const lease = await this.#requireLive(profile, leaseId);
      await this.#tellSecrets(leaseId, lease, session);
      this.#downloads?.watch(session, lease.scope);
      const result = await session.observe(args, limits);
      return { lease: await this.#view(profile, leaseId), result };
    });
  }

  /**
   * The viewport with an observed element outlined, stored as an
   * artifact of the lease's run under `name` when the caller chose one (so an approval naming it
   * can be written while the picture is taken). Not an effect: no sequence, nothing dispatched.
   * Answers once the target is found; the capture follows, as an act's does. A stale revision or
   * a missing element is refused as for act.
   */
  preview(
    profile: ProfileRef,
    leaseId: string,
    args: { revision: string; element: string },
    limits: OperationLimits,
    name?: string,
  ) {
    return this.#serially(profile, leaseId, async (session, later) => {
      const lease = await this.#requireLive(profile, leaseId);
      await this.#tellSecrets(leaseId, lease, session);
      if (!session.previewTarget) return { lease: await this.#view(profile, leaseId), artifacts: {} };
      const outline = (await session.previewTarget(args, limits)) ?? null;
      const [view, shot] = await Promise.all([
        this.#view(profile, leaseId),
        this.#shots?.announce(lease.scope, 'preview', name),
      ]);
      const shots = this.#shots;
      if (shots && shot) later(() => shots.take(session, lease.scope, shot, outline));
      return { lease: view, artifacts: shot ? { screenshot: shot } : {} };
    });
  }

  /**
   * An effect fenced by the action sequence: refused before dispatch unless `sequence` is exactly
   * the next one; the sequence advances (and the effect is counted) in one script right before
   * the effect leaves, so a refusal the page engine gives before dispatch advances nothing.
   */
  #effect(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    deadlineMs: number,
    run: (
      session: PageSession,
      beforeDispatch: () => Promise<void>,
      lease: LeaseRecord,
    ) => Promise<PageResult>,
  ) {
    return this.#serially(profile, leaseId, async (session, later) => {
      // Reads before the effect wait out an outage, as the advance does below.
      // The lease and the sequence are read side by side; a lease that is gone is told first.
      const [live, fenced] = await Promise.allSettled([
        this.#throughOutage(() => this.#requireLive(profile, leaseId), deadlineMs),
        this.#throughOutage(() => this.#fence(profile, leaseId, sequence, false), deadlineMs),
      ]);
      if (live.status === 'rejected') throw live.reason;
      if (fenced.status === 'rejected') throw fenced.reason;
      const lease = live.value;
      await this.#throughOutage(() => this.#tellSecrets(leaseId, lease, session), deadlineMs);
      this.#downloads?.watch(session, lease.scope);
      const sinceMs = Date.now();
      let dispatched = false;
      let result: PageResult;
      try {
        result = await run(
          session,
          async () => {
            // The page is not touched until the advance is answered, so an outage is waited out
            // here too: sent again under the same id, an advance whose answer was lost is told it
            // landed, never counted twice nor refused as another call's.
            const dispatchId = randomUUID();
            await this.#throughOutage(
              () => this.#fence(profile, leaseId, sequence, true, dispatchId),
              deadlineMs,
            );
            dispatched = true;
          },
          lease,
        );
      } catch (error) {
        const answer = this.#failedEffectAnswer(error, leaseId, dispatched, sequence);
        if (dispatched) await this.#noteEffect(profile, leaseId, sequence, answer);
        if (error instanceof NavigationFailedError && dispatched && answer === error) {
          // No server saw the request, but the page moved to Chromium's error page: the sequence
          // advanced with the dispatch and the answer carries the page as it now is.
          throw new DataPlaneError(
            'navigation_failed',
            error.message,
            { dispatched: true, sequence, net_error: error.netError },
            {
              cause: error,
              page: {
                lease: await this.#view(profile, leaseId),
                observation: error.outcome.observation,
                evidenceKey: error.outcome.evidenceKey,
              },
            },
          );
        }
        throw answer;
      }
      if (!dispatched) throw new Error('the page engine answered an effect without dispatching it');
      // DESIGN §12: the answer names the screenshot; the picture is taken right after it. The
      // effect's end is recorded beside them, before the lease's next call can ask about it.
      const [view, shot, downloads] = await Promise.all([
        // The effect happened: a Redis outage delays its answer, it does not lose it.
        this.#throughOutage(() => this.#view(profile, leaseId), deadlineMs),
        this.#shots?.announce(lease.scope, 'shot'),
        // DESIGN §12: what the effect downloaded is its answer's, kept or cancelled.
        this.#downloads?.since(session, sinceMs, deadlineMs) ?? [],
        this.#noteEffect(profile, leaseId, sequence, undefined),
      ]);
      const shots = this.#shots;
      if (shots && shot) later(() => shots.take(session, lease.scope, shot));
      const artifacts = {
        ...result.artifacts,
        ...(shot ? { screenshot: shot } : {}),
        ...(downloads.length > 0 ? { downloads } : {}),
      };
      return { lease: view, result: { ...result, artifacts } };
    });
  }

  /**
   * A failed effect's error as the data plane answers it. The lease closed under the call (its
   * expiry, a revoke): its page went with it, whatever the engine met there, and the run side must
   * learn the lease is gone, not a fault. A failed navigation is answered as it is (see #effect).
   */
  #failedEffectAnswer(error: unknown, leaseId: string, dispatched: boolean, sequence: number): unknown {
    if (this.#closedUnder(leaseId))
      return new DataPlaneError('lease_expired', `lease ${leaseId} was closed during the call`);
    if (error instanceof NavigationFailedError) return error;
    return toldRefusal(error, dispatched, sequence);
  }

  /**
   * Records on the lease how its dispatched effect ended (`failure` undefined: it answered), so a
   * run's next owner handed this call without its answer learns it (see {@link handover}). A
   * record that cannot be written leaves the effect `dispatched`, read as unknown: never a guess.
   */
  async #noteEffect(profile: ProfileRef, leaseId: string, sequence: number, failure: unknown): Promise<void> {
    const refusal =
      failure instanceof NavigationFailedError
        ? 'navigation_failed'
        : failure instanceof DataPlaneError && failure.details.dispatched === true
          ? failure.code
          : undefined;
    const state = failure === undefined ? 'applied' : refusal ? 'refused' : 'unknown';
    try {
      await this.#deps.store.noteEffect(profile, leaseId, sequence, state, refusal);
    } catch {
      // Left `dispatched`: a hand-over reads it as unknown.
    }
  }

  /**
   * What became of the effect a run's last owner sent on this lease with `sequence` and never had
   * answered. Behind the lease's calls in flight (that effect among them, if it arrived), so it
   * answers the effect's end, not its middle; one that never reached the lease is skipped past
   * first (the sequence advances with no effect), so a late copy of it is refused. A lease this
   * worker no longer holds is judged from its record alone: it takes no late copy.
   */
  async handover(profile: ProfileRef, leaseId: string, sequence: number): Promise<HandoverAnswer> {
    const held = this.#deps.held.get(leaseId);
    if (!held || held.profile.tenant !== profile.tenant || held.profile.id !== profile.id) {
      const lease = await this.#deps.store.getLease(profile, leaseId);
      if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
      if (
        lease.state === 'live' &&
        lease.expiresAtMs > this.#deps.clock() &&
        lease.providerRef !== this.#deps.workerId
      )
        throw new DataPlaneError(
          'profile_unavailable',
          `lease ${leaseId} is served by worker ${lease.providerRef}`,
        );
      return this.#handoverAnswer(profile, leaseId, judgeHandedOverCall(lease, sequence, false));
    }
    return this.#serially(profile, leaseId, async () => {
      const lease = await this.#deps.store.getLease(profile, leaseId);
      if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
      const live = lease.state === 'live' && lease.expiresAtMs > this.#deps.clock();
      let verdict = judgeHandedOverCall(lease, sequence, live);
      if (verdict.call === 'skip') {
        const skipped = await this.#deps.store.advanceSequence(
          profile,
          leaseId,
          sequence,
          this.#deps.clock(),
          'skip',
        );
        verdict =
          skipped.status === 'ok' ? { call: 'not_applied', code: null } : { call: 'unknown', code: null };
      }
      return this.#handoverAnswer(profile, leaseId, verdict);
    });
  }

  async #handoverAnswer(
    profile: ProfileRef,
    leaseId: string,
    verdict: HandoverVerdict,
  ): Promise<HandoverAnswer> {
    const call = verdict.call === 'skip' ? 'unknown' : verdict.call;
    const code = verdict.call === 'skip' ? null : verdict.code;
    return { lease: await this.#view(profile, leaseId), call, code };
  }

  /**
   * DESIGN §12: the page learns the declared secrets of the run the lease serves before the
   * lease's first call, and keeps them for the lease's life (one lease serves one run attempt, and
   * a run's secrets never change). They are read from the run's own key and opened here: the run
   * side never holds a value, and everything the page answers has them struck.
   */
  async #tellSecrets(leaseId: string, lease: LeaseRecord, session: PageSession): Promise<void> {
    const held = this.#deps.held.get(leaseId);
    if (!held || held.secretsTold) return;
    const sealed = await this.#deps.store.sealedRunSecrets?.(lease.scope.run_id);
    if (sealed !== undefined) {
      const secrets = this.#openSecrets(sealed, lease);
      if (!session.useSecrets)
        throw new DataPlaneError('internal', "this page cannot hold the run's declared secrets");
      session.useSecrets(secrets);
    }
    held.secretsTold = true;
  }

  #openSecrets(sealed: string, lease: LeaseRecord): OpenedSecret[] {
    const key = this.#deps.sealKeys;
    if (!key)
      throw new DataPlaneError('internal', 'the run declares secrets and this worker has no seal key');
    let opened: unknown;
    try {
      opened = unsealState(sealed, key, runSecretsLabel(lease.scope.tenant, lease.scope.run_id));
    } catch (error) {
      throw new DataPlaneError(
        'internal',
        "the run's declared secrets do not open with this worker's seal key",
        {},
        {
          cause: error,
        },
      );
    }
    const parsed = runSecretsSchema.safeParse(opened);
    if (!parsed.success) throw new DataPlaneError('internal', "the run's declared secrets are not readable");
    return Object.entries(parsed.data).map(([name, secret]) => ({ name, ...secret }));
  }

  async #fence(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    advance: boolean,
    dispatchId?: string,
  ): Promise<void> {
    const outcome = await this.#deps.store.advanceSequence(
      profile,
      leaseId,
      sequence,
      this.#deps.clock(),
      advance,
      dispatchId,
    );
    if (outcome.status === 'ok') return;
    if (outcome.status === 'sequence_mismatch') {
      this.#deps.metrics.sequenceRefusals.inc();
      throw new DataPlaneError(
        'sequence_mismatch',
        `action ${sequence} refused: the lease's last action is ${outcome.current}, so the next is ${outcome.current + 1}`,
        { current_sequence: outcome.current },
      );
    }
    if (outcome.status === 'lease_expired')
      throw new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`);
    throw new DataPlaneError('not_found', `no lease ${leaseId}`);
  }

  async #requireLive(profile: ProfileRef, leaseId: string): Promise<LeaseRecord> {
    const lease = await this.#deps.store.getLease(profile, leaseId);
    if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
    if (lease.state !== 'live' || lease.expiresAtMs <= this.#deps.clock()) {
      if (lease.state === 'live')
        await this.#deps.close(profile, leaseId, { seal: false, reason: 'expired' });
      throw new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`);
    }
    return lease;
  }

  #closedUnder(leaseId: string): boolean {
    const held = this.#deps.held.get(leaseId);
    return !held || held.closing !== undefined;
  }

  /**
   * Runs `run` after the lease's earlier calls; what it leaves to `later` runs after its answer
   * and before the lease's next call (the answer does not wait for it).
   */
  async #serially<T>(
    profile: ProfileRef,
    leaseId: string,
    run: (session: PageSession, later: Later) => Promise<T>,
  ): Promise<T> {
    const held = this.#deps.held.get(leaseId);
    if (!held || held.profile.tenant !== profile.tenant || held.profile.id !== profile.id) {
      const lease = await this.#deps.store.getLease(profile, leaseId);
      if (!lease) throw new DataPlaneError('not_found', `no lease ${leaseId}`);
      if (lease.providerRef !== this.#deps.workerId)
        throw new DataPlaneError(
          'profile_unavailable',
          `lease ${leaseId} is served by worker ${lease.providerRef}`,
        );
      throw new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`);
    }
    this.#refuseWhilePersonHolds(held, leaseId);
    const after: Array<() => Promise<void>> = [];
    const next = held.tail.then(async () => {
      // A person may have taken the page while this call waited its turn.
      this.#refuseWhilePersonHolds(held, leaseId);
      return run(await held.session, (work) => after.push(work));
    });
    held.tail = next
      .then(async () => {
        for (const work of after) await work();
      })
      .catch(() => undefined);
    const leftAfter = held.tail;
    next.then(
      () => {
        if (after.length > 0) held.afterAnswer = leftAfter;
      },
      () => undefined,
    );
    return next;
  }

  #view(profile: ProfileRef, leaseId: string): Promise<LeaseView> {
    return readLeaseView(this.#deps.store, profile, leaseId);
  }

  /**
   * A call that met a Redis outage (its command unanswered in the bound), made again once this
   * worker's Redis answers, until the call's deadline: before the outage was noticed a command
   * failed as soon as it timed out, while the pages' calls need only wait for their answer.
   */
  async #throughOutage<T>(call: () => Promise<T>, deadlineMs: number): Promise<T> {
    for (;;) {
      try {
        return await call();
      } catch (error) {
        const leftMs = deadlineMs - Date.now();
        if (!isRedisUnreachable(error) || leftMs <= 0) throw error;
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([
          this.#deps.redisLink.whenUp(),
          new Promise((resolve) => {
            timer = setTimeout(resolve, leftMs);
          }),
        ]).finally(() => clearTimeout(timer));
      }
    }
  }

  /** While a person holds the page, every page call of the agent is refused before dispatch. */
  #refuseWhilePersonHolds(held: HeldLease, leaseId: string): void {
    if (personHolds(held, this.#deps.clock()))
      throw new DataPlaneError('person_in_control', `a person holds the page of lease ${leaseId}`, {
        dispatched: false,
      });
  }
}
