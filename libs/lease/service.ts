import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { OperationLimits } from '../browser/index.js';
import type {
  AcquireAnswer,
  AcquireLease,
  CreateProfile,
  LeaseCloseReason,
  LeaseView,
  ProfileRef,
  ProfileView,
  SealFault,
} from '../contracts/index.js';
import { assertNever, pinsServe, profileLabel } from '../contracts/index.js';
import type { LeaseMetrics } from '../telemetry/index.js';
import { DataPlaneError, unclaimedKeyError } from './errors.js';
import type { HeldLease } from './held-lease.js';
import { leaseView, profileView, readLeaseView } from './lease-views.js';
import { LeasePageCalls } from './page-calls.js';
import type { PageFactory, PageSession } from './pages.js';
import { LeasePersonCalls } from './person-calls.js';
import type {
  IdempotencyClaim,
  IdempotencyTicket,
  IdempotentRenewal,
  IdempotentRenewOutcome,
  LeaseCaps,
  LeaseRecord,
  LeaseStore,
  ProfileSettings,
  StoredProfile,
} from './ports.js';
import type { SealKeys } from './seal.js';
import { SealOpenError, sealState, unsealState } from './seal.js';
import { sealRefusal } from './seal-refusal.js';
import {
  type CompiledLeaseServiceOptions,
  compileLeaseServiceOptions,
  type LeaseServiceOptions,
} from './service-options.js';

/**
 * One renewal's result in a batch: the stored answer of an earlier request with its key,
 * the lease renewed, a refusal (`claimed`: the item's idempotency record is this call's to complete,
 * as the single route stores its refusals), or an unexpected failure (its record is to be released).
 */
export type RenewalResult =
  | { kind: 'replay'; httpStatus: number; body: string }
  | { kind: 'renewed'; lease: LeaseView }
  | { kind: 'refused'; error: DataPlaneError; claimed: boolean }
  | { kind: 'failed'; error: unknown };

/**
 * The lease rules of the browser worker (DESIGN §5, ADR-0127 d1, d5, d8): admission before
 * publication, reattach on the same scope, one browser context per lease, renew within the caps,
 * seal only on a close before expiry, and the action sequence fenced at dispatch.
 */
export class LeaseService {
  readonly #held = new Map<string, HeldLease>();
  readonly #options: CompiledLeaseServiceOptions;
  readonly #store: LeaseStore;
  readonly #pages: PageFactory;
  readonly #clock: () => number;
  readonly #caps: LeaseCaps;
  readonly #log: Logger;
  readonly #metrics: LeaseMetrics;
  readonly #pageCalls: LeasePageCalls;
  readonly #personCalls: LeasePersonCalls;
  readonly #sealKeys: SealKeys;

  constructor(given: LeaseServiceOptions) {
    const options = compileLeaseServiceOptions(given);
    this.#options = options;
    this.#sealKeys = options.sealKeys;
    this.#store = options.store;
    this.#pages = options.pages;
    this.#clock = options.clock;
    this.#caps = options.caps;
    this.#log = options.logger.child({ component: 'lease-service' });
    this.#metrics = options.metrics;
    this.#pageCalls = new LeasePageCalls({
      store: this.#store,
      workerId: options.workerId,
      clock: this.#clock,
      metrics: this.#metrics,
      held: this.#held,
      close: (profile, leaseId, closeOptions) => this.close(profile, leaseId, closeOptions),
      artifacts: options.artifacts,
      sealKeys: this.#sealKeys,
      redisLink: options.redisLink,
    });
    this.#personCalls = new LeasePersonCalls({ store: this.#store, clock: this.#clock, held: this.#held });
  }

  get workerId(): string {
    return this.#options.workerId;
  }

  /** Leases whose contexts this process holds. */
  heldLeaseIds(): string[] {
    return [...this.#held.keys()];
  }

  // ---- profiles ---------------------------------------------------------------------------

  /** Ids are unique within a tenant: another tenant's profile of the same id is no conflict (DESIGN §3). */
  async createProfile(profile: CreateProfile): Promise<ProfileView> {
    if (!(await this.#store.createProfile(profile, this.#clock())))
      throw new DataPlaneError('conflict', `profile ${profile.id} exists already`);
    return profileView(await this.#requireProfile(profile));
  }

  async getProfile(profile: ProfileRef): Promise<ProfileView> {
    return profileView(await this.#requireProfile(profile));
  }

  /** One tenant's profiles: the store reads that tenant's index alone. */
  async listProfiles(tenant: string): Promise<ProfileView[]> {
    return (await this.#store.listProfiles(tenant)).map(profileView);
  }

  async #requireProfile(profile: ProfileRef): Promise<StoredProfile> {
    const stored = await this.#store.getProfile(profile);
    if (!stored) throw new DataPlaneError('not_found', `no profile ${profile.id}`);
    return stored;
  }

  #servesProfile(profile: ProfileRef): boolean {
    return pinsServe(this.#options.pinnedProfiles, profile);
  }

  // ---- acquire, renew, close --------------------------------------------------------------

  /**
   * Admits, then publishes or reattaches (DESIGN §5). With an idempotency ticket the key is claimed
   * in the same script: a key already used answers its claim and nothing is done.
   */
  acquire(profile: ProfileRef, request: AcquireLease): Promise<AcquireAnswer>;
  acquire(
    profile: ProfileRef,
    request: AcquireLease,
    idempotency: IdempotencyTicket,
  ): Promise<AcquireAnswer | UnclaimedKey>;
  async acquire(
    profile: ProfileRef,
    request: AcquireLease,
    idempotency?: IdempotencyTicket,
  ): Promise<AcquireAnswer | UnclaimedKey> {
    const startedAt = performance.now();
    try {
      const answer = await this.#acquire(profile, request, idempotency);
      if ('claim' in answer) return answer;
      this.#metrics.operations.inc({ op: 'acquire', result: answer.created ? 'created' : 'reattached' });
      this.#metrics.acquireSeconds.observe(
        { result: answer.created ? 'created' : 'reattached' },
        (performance.now() - startedAt) / 1000,
      );
      return answer;
    } catch (error) {
      this.#metrics.operations.inc({
        op: 'acquire',
        result: error instanceof DataPlaneError ? error.code : 'error',
      });
      throw error;
    }
  }

  async #acquire(
    ref: ProfileRef,
    request: AcquireLease,
    idempotency: IdempotencyTicket | undefined,
  ): Promise<AcquireAnswer | UnclaimedKey> {
    const profileId = ref.id;
    // Admission comes before publication: nothing is written for a caller that may not lease. It
    // runs in the store's acquire script, so one round trip admits and publishes; a
    // scope of another tenant names another tenant's profile, which reads as absent (DESIGN §3).
    const scope = {
      tenant: request.tenant,
      principal: request.principal,
      run_id: request.run_id,
      attempt: request.attempt,
    };
    const served = this.#servesProfile(ref);
    // Each pass either answers or removes one obstacle (an expired or orphaned lease); three suffice.
    for (let pass = 0; pass < 3; pass += 1) {
      const outcome = await this.#store.acquire({
        profile: ref,
        served,
        // The key is claimed once, by the first pass; later passes run under that claim.
        ...(pass === 0 && idempotency ? { idempotency } : {}),
        newLeaseId: newLeaseId(),
        scope,
        providerRef: this.workerId,
        requestedExpiresAtMs: request.requested_expires_at_ms,
        nowMs: this.#clock(),
        caps: this.#caps,
      });
      switch (outcome.status) {
        case 'idempotency':
          return { claim: outcome.claim };
        case 'not_found':
          throw new DataPlaneError('not_found', `no profile ${profileId}`);
        case 'not_served':
          throw new DataPlaneError(
            'profile_unavailable',
            `profile ${profileId} is not served by worker ${this.workerId}`,
          );
        case 'protected':
          throw new DataPlaneError(
            'profile_unavailable',
            `profile ${profileId} is protected against this principal`,
          );
        case 'created':
          return { ...(await this.#open(outcome.profile, outcome.lease)), created: true };
        case 'reattached': {
          // The script answered the lease as it stands: nothing more to read.
          if (this.#held.has(outcome.leaseId)) return { ...leaseView(outcome.lease), created: false };
          // Ours by scope, but its page is gone (a restart): revoke it and start afresh.
          await this.close(ref, outcome.leaseId, { seal: false, reason: 'revoked' });
          continue;
        }
        case 'expired':
          // ADR-0127 d8: an expired lease is closed unsealed before anything else happens.
          await this.close(ref, outcome.leaseId, { seal: false, reason: 'expired' });
          continue;
        case 'conflict':
          throw new DataPlaneError(
            'profile_unavailable',
            `profile ${profileId} is leased to run ${outcome.runId} attempt ${outcome.attempt}`,
            {
              holder_run_id: outcome.runId,
              holder_attempt: outcome.attempt,
              holder_lease_id: outcome.leaseId,
            },
          );
        default:
          return assertNever(outcome);
      }
    }
    throw new DataPlaneError('provider_unavailable', `profile ${profileId} could not be leased; try again`);
  }

  /**
   * The lease's context: a warm one restored from the profile's current seal version when the pool
   * has one, else one made now from the sealed state, read after publication: nothing
   * can seal the profile while this lease is live, so that read is the state the lease starts from.
   */
  async #open(profile: ProfileSettings, lease: LeaseRecord): Promise<LeaseView> {
    const ref: ProfileRef = { tenant: profile.tenant, id: profile.id };
    const leaseId = lease.id;
    const warm = this.#options.warmPool?.take(ref, profile.sealVersion);
    const session = warm ? Promise.resolve(warm) : this.#busy(this.#openCold(profile));
    this.#metrics.contexts.inc({ source: warm ? 'warm' : 'cold' });
    const held: HeldLease = { profile: ref, session, tail: Promise.resolve() };
    this.#held.set(leaseId, held);
    try {
      await session;
    } catch (error) {
      this.#held.delete(leaseId);
      if (!(error instanceof SealOpenError))
        this.#log.error({ lease_id: leaseId, err: error }, 'browser context could not be created');
      await this.#store.beginClose(ref, leaseId, this.#clock(), 'revoked');
      await this.#store.finishClose(ref, leaseId, this.#clock(), undefined);
      if (error instanceof SealOpenError) throw await this.#refuseSealedState(ref, leaseId, error);
      throw new DataPlaneError(
        'provider_unavailable',
        'the browser context could not be created',
        {},
        { cause: error },
      );
    }
    // The state opened here: a note that it would not (here or on another worker) is no longer true.
    if (profile.sealFault) await this.#noteSealFault(ref, undefined);
    // A profile acquired here is kept warm from now on. The refill starts once this lease's context
    // is ready, so it never competes with the acquire that is being answered.
    this.#options.warmPool?.want(ref);
    this.#gauges();
    return leaseView(lease);
  }

  async #openCold(profile: ProfileSettings): Promise<PageSession> {
    const ref: ProfileRef = { tenant: profile.tenant, id: profile.id };
    const sealed = await this.#store.sealedState(ref);
    const storageState = sealed?.blob
      ? unsealState(sealed.blob, this.#sealKeys, profileLabel(ref))
      : undefined;
    // The page fence of every page and frame of the lease takes the profile's settings.
    return this.#pages.open({
      profileId: profile.id,
      allowedOrigins: profile.allowedOrigins,
      frameOrigins: profile.frameOrigins,
      subresources: profile.subresources,
      storageState,
    });
  }

  /** The state did not open here: noted on the profile, counted and logged, then refused for good. */
  async #refuseSealedState(ref: ProfileRef, leaseId: string, error: SealOpenError): Promise<DataPlaneError> {
    const refusal = sealRefusal({
      profile: ref,
      workerId: this.workerId,
      keys: this.#sealKeys,
      error,
      nowMs: this.#clock(),
    });
    this.#metrics.sealRefusals.inc({ code: refusal.fault.code });
    this.#log.error(
      {
        lease_id: leaseId,
        tenant: ref.tenant,
        profile_id: ref.id,
        code: refusal.fault.code,
        sealed_with: error.sealedWith ?? null,
        worker_keys: this.#sealKeys.fingerprints,
        err: error.cause,
      },
      'sealed state did not open',
    );
    await this.#noteSealFault(ref, refusal.fault);
    return refusal.error;
  }

  /** The profile's note of a seal fault, written or cleared; a failed write is logged, never the caller's failure. */
  async #noteSealFault(ref: ProfileRef, fault: SealFault | undefined): Promise<void> {
    await this.#store
      .noteSealFault(ref, fault)
      .catch((error: unknown) =>
        this.#log.warn(
          { tenant: ref.tenant, profile_id: ref.id, err: error },
          'seal fault could not be noted',
        ),
      );
  }

  /**
   * Renews under the request's Idempotency-Key: one script claims the key and renews, as
   * it does for each renewal of `renewMany`, so a renewal sent alone and in a batch take one path
   * (claim, renew, and the lease as it is after, in one round trip). A key already used answers its
   * claim and nothing is done; an expired or revoked lease is closed unsealed before `lease_expired`.
   */
  async renew(
    profile: ProfileRef,
    leaseId: string,
    requestedExpiresAtMs: number,
    idempotency: IdempotencyTicket,
  ): Promise<LeaseView | UnclaimedKey> {
    const [outcome] = await this.#store.renewIdempotently(
      [
        {
          profile,
          leaseId,
          requestedExpiresAtMs,
          idempotencyKey: idempotency.key,
          requestHash: idempotency.requestHash,
        },
      ],
      this.#clock(),
      this.#caps,
    );
    if (!outcome) throw new Error('renewIdempotently answered no outcome');
    switch (outcome.status) {
      case 'replay':
      case 'pending':
      case 'conflict':
        return { claim: outcome };
      default: {
        const result = await this.#claimedRenewal(outcome, profile, leaseId);
        if (result.kind === 'renewed') return result.lease;
        throw result.error;
      }
    }
  }

  /**
   * Many renewals at once, each under its own idempotency record, by the rules `renew`
   * follows (one script, one Lua include): one pipelined round trip claims and renews them all, and
   * the renewed leases come back with it. Each claimed one is answered as `renew` answers it.
   */
  async renewMany(renewals: readonly IdempotentRenewal[]): Promise<RenewalResult[]> {
    const outcomes = await this.#store.renewIdempotently(renewals, this.#clock(), this.#caps);
    return Promise.all(
      outcomes.map(async (outcome, index): Promise<RenewalResult> => {
        const { profile, leaseId } = renewals[index] as IdempotentRenewal;
        switch (outcome.status) {
          case 'replay':
            return { kind: 'replay', httpStatus: outcome.httpStatus, body: outcome.body };
          case 'conflict':
          case 'pending':
            return { kind: 'refused', claimed: false, error: unclaimedKeyError(outcome.status) };
          default:
            return this.#claimedRenewal(outcome, profile, leaseId);
        }
      }),
    );
  }

  /**
   * What a renewal whose key it claimed answers, alone or in a batch: the lease renewed, `not_found`,
   * or `lease_expired` once the lease is closed unsealed (DESIGN §5, ADR-0127 d5, d8: closed before
   * the answer, whoever began the close — this call or the expiry sweep). A close that fails
   * unexpectedly is the renewal's failure: its key is released, so a retry really retries.
   */
  async #claimedRenewal(
    outcome: ClaimedRenewOutcome,
    profile: ProfileRef,
    leaseId: string,
  ): Promise<Exclude<RenewalResult, { kind: 'replay' }>> {
    switch (outcome.status) {
      case 'not_found':
        return {
          kind: 'refused',
          claimed: true,
          error: new DataPlaneError('not_found', `no lease ${leaseId}`),
        };
      case 'lease_expired':
        this.#metrics.operations.inc({ op: 'renew', result: 'lease_expired' });
        try {
          await this.close(profile, leaseId, { seal: false, reason: 'expired' });
        } catch (error) {
          if (!(error instanceof DataPlaneError && error.status < 500)) return { kind: 'failed', error };
        }
        return {
          kind: 'refused',
          claimed: true,
          error: new DataPlaneError('lease_expired', `lease ${leaseId} has expired or was revoked`),
        };
      case 'renewed':
        this.#metrics.operations.inc({ op: 'renew', result: 'renewed' });
        return { kind: 'renewed', lease: leaseView(outcome.lease) };
      default:
        return assertNever(outcome);
    }
  }

  /**
   * Closes a lease: seals its storage state into the profile when asked and the lease is still
   * unexpired (ADR-0127 d8), then disposes its context. Closing a closed lease answers its record.
   */
  async close(
    profile: ProfileRef,
    leaseId: string,
    { seal, reason = 'closed' }: { seal: boolean; reason?: LeaseCloseReason },
  ): Promise<LeaseView> {
    const held = this.#held.get(leaseId);
    if (held?.closing) return held.closing;
    const closing = this.#close(profile, leaseId, seal, reason);
    if (held) held.closing = closing;
    return closing;
  }

  async #close(
    profile: ProfileRef,
    leaseId: string,
    seal: boolean,
    reason: LeaseCloseReason,
  ): Promise<LeaseView> {
    const begun = await this.#store.beginClose(profile, leaseId, this.#clock(), reason);
    if (begun.status === 'not_found') throw new DataPlaneError('not_found', `no lease ${leaseId}`);
    if (begun.status === 'closed' || begun.status === 'in_progress') return this.#view(profile, leaseId);

    const held = this.#held.get(leaseId);
    let blob: string | undefined;
    if (held) {
      // A deliberate close lets the answered calls finish what they left for after their answer
      // (their pictures); an expiry or a revoke does not wait: the page is gone or must go now.
      if (reason === 'closed') await this.#pageCalls.afterAnswersDone(held);
      // The live view's streams end with the page, before it goes.
      await this.#personCalls.closed(held);
      const session = await held.session.catch(() => undefined);
      if (session && seal && begun.sealAllowed && reason === 'closed') {
        try {
          // Always the current key: state opened with a previous one is rotated by this seal.
          blob = sealState(await session.storageState(), this.#sealKeys.current, profileLabel(profile));
        } catch (error) {
          this.#log.warn(
            { lease_id: leaseId, err: error },
            'storage state could not be read; closing unsealed',
          );
        }
      }
      await session
        ?.dispose()
        .catch((error: unknown) => this.#log.warn({ lease_id: leaseId, err: error }, 'dispose failed'));
      this.#held.delete(leaseId);
      this.#gauges();
    }
    const finished = await this.#store.finishClose(profile, leaseId, this.#clock(), blob);
    // The warm contexts were restored from the state before this seal; make new ones.
    if (finished.sealed) this.#options.warmPool?.resealed(profile);
    this.#metrics.operations.inc({ op: 'close', result: finished.sealed ? 'sealed' : finished.reason });
    if (finished.reason === 'expired') this.#metrics.expiryCloses.inc();
    this.#log.info(
      {
        lease_id: leaseId,
        tenant: profile.tenant,
        profile_id: profile.id,
        sealed: finished.sealed,
        reason: finished.reason,
      },
      'lease closed',
    );
    return this.#view(profile, leaseId);
  }

  async getLease(profile: ProfileRef, leaseId: string): Promise<LeaseView> {
    return this.#view(profile, leaseId);
  }

  // ---- page routes ------------------------------------------------------------------------

  navigate(profile: ProfileRef, leaseId: string, sequence: number, url: string, limits: OperationLimits) {
    return this.#busy(
      this.#pageCalls.navigate(profile, leaseId, sequence, url, limits).catch((error: unknown) => {
        if (error instanceof DataPlaneError && error.code === 'navigation_failed') {
          // The one line that names why: the URL is the tenant's, so only the error name is logged.
          this.#log.info(
            { lease_id: leaseId, sequence, net_error: error.details.net_error },
            'navigation failed before reaching a server',
          );
        }
        throw error;
      }),
    );
  }

  act(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    args: Record<string, unknown>,
    limits: OperationLimits,
  ) {
    return this.#busy(this.#pageCalls.act(profile, leaseId, sequence, args, limits));
  }

  observe(profile: ProfileRef, leaseId: string, args: Record<string, unknown>, limits: OperationLimits) {
    return this.#busy(this.#pageCalls.observe(profile, leaseId, args, limits));
  }

  /** What became of an effect a run's last owner sent on this lease unanswered (a hand-over). */
  handover(profile: ProfileRef, leaseId: string, sequence: number) {
    return this.#pageCalls.handover(profile, leaseId, sequence);
  }

  preview(
    profile: ProfileRef,
    leaseId: string,
    args: { revision: string; element: string },
    limits: OperationLimits,
    /** The screenshot's name, when the caller chose it (an approval that names it is written meanwhile). */
    name?: string,
  ) {
    return this.#busy(this.#pageCalls.preview(profile, leaseId, args, limits, name));
  }

  // ---- a person on the page ----------------------------------------------------------------

  /** The person calls: the live view's viewers and person control (see LeasePersonCalls). */
  get person(): LeasePersonCalls {
    return this.#personCalls;
  }

  /** Resolves once every screenshot named so far is stored or noted failed (they follow the answers). */
  screenshotsDrained(): Promise<void> {
    return this.#pageCalls.screenshotsDrained();
  }

  /** A page call (or a context made for an acquire) under way, for the warm pool to wait out. */
  #busy<T>(work: Promise<T>): Promise<T> {
    return this.#options.activity ? this.#options.activity.track(work) : work;
  }

  // ---- upkeep inside the service ----------------------------------------------------------

  /** Closes, unsealed, every lease held here that is past its expiry; returns how many. */
  async sweepExpired(): Promise<number> {
    let closed = 0;
    for (const [leaseId, held] of [...this.#held]) {
      const lease = await this.#store.getLease(held.profile, leaseId);
      const live = lease?.state === 'live';
      if ((live && lease.expiresAtMs > this.#clock()) || held.closing) continue;
      const reason = live ? 'expired' : 'revoked';
      await this.close(held.profile, leaseId, { seal: false, reason }).catch((error: unknown) =>
        this.#log.warn({ lease_id: leaseId, err: error }, 'expiry close failed'),
      );
      closed += 1;
    }
    return closed;
  }

  /**
   * At start: live leases recorded for the profiles this worker serves whose pages it does not hold
   * (a crash or restart lost them) are revoked, unsealed (DESIGN §5).
   */
  async revokeOrphans(): Promise<number> {
    let revoked = 0;
    for (const profile of await this.#store.listAllProfileRefs()) {
      if (!this.#servesProfile(profile)) continue;
      const leaseId = await this.#store.liveLeaseId(profile);
      if (!leaseId || this.#held.has(leaseId)) continue;
      const lease = await this.#store.getLease(profile, leaseId);
      if (!lease || lease.providerRef !== this.workerId) continue;
      await this.close(profile, leaseId, { seal: false, reason: 'revoked' });
      revoked += 1;
    }
    return revoked;
  }

  /** Worker shutdown: every held lease is revoked unsealed (its page goes with this process). */
  async shutdown(): Promise<void> {
    await this.revokeHeld();
    // Screenshots already taken are written and noted; those not taken are noted `page_closed`.
    await this.#pageCalls.screenshotsDrained();
  }

  /**
   * Every held lease revoked unsealed: its page is gone (the worker stops, or Chromium exited), so
   * there is nothing true to seal and the run side must acquire afresh.
   */
  async revokeHeld(): Promise<void> {
    await Promise.all(
      [...this.#held].map(([leaseId, held]) =>
        this.close(held.profile, leaseId, { seal: false, reason: 'revoked' }).catch((error: unknown) =>
          this.#log.warn({ lease_id: leaseId, err: error }, 'revoking a held lease failed'),
        ),
      ),
    );
  }

  #view(profile: ProfileRef, leaseId: string): Promise<LeaseView> {
    return readLeaseView(this.#store, profile, leaseId);
  }

  #gauges(): void {
    this.#metrics.liveLeases.set(this.#held.size);
    this.#metrics.contextsOpen.set(this.#pages.openContexts());
  }
}

/** A renewal whose idempotency key it claimed: the renewal's own outcome. */
type ClaimedRenewOutcome = Exclude<IdempotentRenewOutcome, IdempotencyClaim>;

/** An acquire or renew whose idempotency key was not claimed: the claim's answer, and nothing was done. */
export interface UnclaimedKey {
  claim: Exclude<IdempotencyClaim, { status: 'claimed' }>;
}

function newLeaseId(): string {
  return `lse_${randomBytes(12).toString('base64url')}`;
}
