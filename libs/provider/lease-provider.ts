import type {
  AcquireLease,
  HandoverAnswer,
  LeaseScope,
  LeaseView,
  PageArtifacts,
  ProfileRef,
} from '../contracts/index.js';
import {
  type AcquireRetryPolicy,
  acquireWithRetry,
  compileAcquireRetryPolicy,
  SINGLE_ACQUIRE_ATTEMPT,
} from './acquire-retry.js';
import type { PageCallResult } from './answers.js';
import { BrowserWorkerAway, neverConnected } from './browser-worker-away.js';
import {
  type AcquireResult,
  type CallLimits,
  DataPlaneClient,
  DEFAULT_LEASE_CALL_TIMEOUT_MS,
} from './client.js';
import { ProviderError } from './errors.js';
import { type ConflictingHolder, replaceableHolder } from './holder-replacement.js';
import { acquireIdempotencyKey, replacingAcquireIdempotencyKey } from './idempotency-keys.js';
import type {
  BrowserLeaseProviderOptions,
  BrowserWorkerLocation,
  DispatchedEffect,
  HeldLease,
  LeaseDropReason,
} from './lease-provider-options.js';
import { judgeFailedPageCall } from './lease-trust.js';

export { BrowserWorkerAway } from './browser-worker-away.js';
export type {
  BrowserLeaseProviderOptions,
  BrowserWorkerLocation,
  DispatchedEffect,
  HeldLease,
  LeaseDropReason,
} from './lease-provider-options.js';

/** A lease dropped as untrusted (ADR-0127 d2, d3), kept until the next acquire. */
interface RetiredLease {
  lease: HeldLease;
  /** Whether the service has closed it; one still open is closed before the next acquire. */
  closed: boolean;
}

/**
 * One run execution's side of its browser lease (DESIGN §5, ADR-0127): acquires or reattaches,
 * carries the action sequence, and stops using a lease it can no longer trust.
 *
 * A provider serves one run execution and its calls come one at a time (the run loop awaits each).
 * A run resumed in another process builds a new provider with the same scope; its first
 * {@link ensureLease} reattaches to the live lease and continues from its sequence (ADR-0127 d1).
 */
export class BrowserLeaseProvider {
  readonly scope: LeaseScope;
  readonly profileId: string;
  /** The profile as the data plane names it: the scope's tenant and the id. */
  readonly profile: ProfileRef;
  readonly #options: BrowserLeaseProviderOptions;
  readonly #clock: () => number;
  readonly #acquireRetry: AcquireRetryPolicy;
  #held: HeldLease | undefined;
  /** The lease last dropped as untrusted; ADR-0127 d3 closes it before the next acquire if the drop could not. */
  #retired: RetiredLease | undefined;

  constructor(options: BrowserLeaseProviderOptions) {
    this.scope = Object.freeze({ ...options.scope });
    this.profileId = options.profileId;
    this.profile = Object.freeze({ tenant: this.scope.tenant, id: options.profileId });
    this.#options = options;
    this.#clock = options.clock ?? Date.now;
    this.#acquireRetry = compileAcquireRetryPolicy(options.acquireRetry ?? SINGLE_ACQUIRE_ATTEMPT);
  }

  /** The lease in use, for the run record; undefined before the first acquire and after a drop. */
  get lease(): Readonly<HeldLease> | undefined {
    return this.#held ? { ...this.#held } : undefined;
  }

  /**
   * The lease last dropped as untrusted, until the next acquire (or the provider's close): closed at
   * the drop where it still could be, else closed before that acquire (ADR-0127 d2, d3).
   */
  get retiredLease(): Readonly<HeldLease> | undefined {
    return this.#retired ? { ...this.#retired.lease } : undefined;
  }

  /**
   * The lease for a tool invocation: the one held while it is unexpired, else an acquire — a
   * reattach when this run attempt's lease is still live. The request is computed once per
   * invocation and sent under a key derived from `invocationId`, so sending it again replays: only
   * this acquisition is retried, under the provider's recovery policy, inside `limits.deadlineMs`
   * and `limits.signal` (ADR-0177). A retired lease is closed first, once, outside the retry.
   */
  async ensureLease(
    invocationId: string,
    requestedExpiresAtMs: number,
    limits: CallLimits = {},
  ): Promise<Readonly<HeldLease>> {
    if (this.#held && this.#held.expiresAtMs > this.#clock()) return { ...this.#held };
    // ADR-0127 consequences: an expired lease is not closed by the provider; the service discards it.
    if (this.#held) this.drop('expired');

    const worker = await this.#options.findWorker(this.profile);
    if (!worker) throw new BrowserWorkerAway(`no live browser worker serves profile ${this.profileId}`);
    // ADR-0127 d3: an untrusted lease still open is closed first, else this acquire (same scope)
    // would reattach to it. A close that fails fails this call; nothing is acquired.
    await this.#closeRetired(limits, { worker });
    // ADR-0177: one request per invocation, byte-identical on every attempt (scope, attempt, expiry, key).
    const request = Object.freeze({ ...this.scope, requested_expires_at_ms: requestedExpiresAtMs });
    const idempotencyKey = acquireIdempotencyKey(invocationId);
    // Deadlines are wall-clock epoch ms (CallLimits); every attempt and delay shares this one.
    const deadlineMs = limits.deadlineMs ?? Date.now() + DEFAULT_LEASE_CALL_TIMEOUT_MS;
    const attemptLimits: CallLimits = { ...limits, deadlineMs };
    let lease: LeaseView;
    try {
      lease = await acquireWithRetry(
        () => this.#acquireOnce(worker, request, idempotencyKey, attemptLimits),
        {
          policy: this.#acquireRetry,
          invocationId,
          deadlineMs,
          signal: limits.signal,
          clock: Date.now,
          onAttemptFailed: this.#options.onAcquireAttempt,
        },
      );
    } catch (error) {
      // Every attempt found nothing listening at the registered address — a restart.
      if (neverConnected(error))
        throw new BrowserWorkerAway(
          `browser worker ${worker.id} of profile ${this.profileId} does not answer`,
          {
            cause: error,
          },
        );
      // ADR-0127 d7: a conflict is never retried; replacing an ended run's lease is one step after it.
      const holder = await replaceableHolder(error, this.scope, this.#options.holderNeedsPage);
      if (!holder) throw error;
      await this.#sealHolder(worker, holder, attemptLimits);
      const replacingKey = replacingAcquireIdempotencyKey(invocationId, holder.leaseId);
      lease = await this.#acquireOnce(worker, request, replacingKey, attemptLimits);
    }
    this.#held = {
      leaseId: lease.lease_id,
      profileId: this.profileId,
      workerId: lease.provider_ref,
      workerUrl: worker.url,
      acquiredAtMs: lease.acquired_at_ms,
      expiresAtMs: lease.expires_at_ms,
      sequence: lease.sequence,
    };
    await this.#options.onLeaseHeld?.({ ...this.#held });
    return { ...this.#held };
  }

  /** Seals and closes an ended holder's lease (ADR-0127 d7); one the service no longer knows is gone already. */
  async #sealHolder(
    worker: BrowserWorkerLocation,
    holder: ConflictingHolder,
    limits: CallLimits,
  ): Promise<void> {
    await this.#closeAt(worker.url, this.profile, holder.leaseId, { seal: true }, limits);
  }

  /** One acquisition attempt: the acquire, and for a replayed answer a read of the lease as it is now. */
  async #acquireOnce(
    worker: BrowserWorkerLocation,
    request: AcquireLease,
    idempotencyKey: string,
    limits: CallLimits,
  ): Promise<LeaseView> {
    const client = this.#client(worker.url);
    const acquired: AcquireResult = await client.acquire(this.profile, request, idempotencyKey, limits);
    let lease: LeaseView = acquired.lease;
    // A replayed answer is as old as the first request: read the lease's current expiry and sequence.
    if (acquired.replayed) lease = await client.getLease(this.profile, lease.lease_id, limits);
    if (lease.state !== 'live' || lease.expires_at_ms <= this.#clock())
      throw new ProviderError(
        'lease_expired',
        `acquire answered lease ${lease.lease_id} that is no longer live`,
        false,
        { operation: 'acquire' },
      );
    return lease;
  }

  /** Navigates the held lease's page: an effect carrying the next action sequence. */
  navigate(url: string, limits: CallLimits = {}): Promise<PageCallResult> {
    return this.#call('navigate', limits, (client, lease) =>
      client.navigate(this.#profileOf(lease), lease.leaseId, lease.sequence + 1, url, limits),
    );
  }

  /** Observes the held lease's page; the sequence does not move. */
  observe(args: Record<string, unknown>, limits: CallLimits = {}): Promise<PageCallResult> {
    return this.#call('observe', limits, (client, lease) =>
      client.observe(this.#profileOf(lease), lease.leaseId, args, limits),
    );
  }

  /** Acts on the held lease's page: an effect carrying the next action sequence. */
  act(args: Record<string, unknown>, limits: CallLimits = {}): Promise<PageCallResult> {
    return this.#call('act', limits, (client, lease) =>
      client.act(this.#profileOf(lease), lease.leaseId, lease.sequence + 1, args, limits),
    );
  }

  /**
   * What became of an effect the run's last owner sent on `effect.leaseId` with `effect.sequence`
   * and never had answered. Asked of the browser worker serving the profile now, before any reattach,
   * so the lease's sequence is read after that effect's end, or after the skip past an effect that
   * never reached it; the held lease's sequence follows the answer. Never sends the effect again.
   */
  async handover(effect: DispatchedEffect, limits: CallLimits = {}): Promise<HandoverAnswer> {
    const worker = await this.#options.findWorker(this.profile);
    if (!worker) throw new BrowserWorkerAway(`no live browser worker serves profile ${this.profileId}`);
    const answer = await this.#client(worker.url).handover(
      this.profile,
      effect.leaseId,
      effect.sequence,
      limits,
    );
    const held = this.#held;
    if (held?.leaseId === effect.leaseId) {
      held.sequence = answer.lease.sequence;
      held.expiresAtMs = answer.lease.expires_at_ms;
    }
    return answer;
  }

  /**
   * The held lease's page with an observed element outlined. Not an
   * effect, so no trust rule applies: a failure is the caller's to shrug off (the card goes
   * without its screenshot) and the lease is kept. Without a held lease there is nothing to show.
   */
  async preview(
    args: { revision: string; element: string },
    limits: CallLimits = {},
    screenshot?: string,
  ): Promise<PageArtifacts> {
    const held = this.#held;
    if (!held || held.expiresAtMs <= this.#clock()) return {};
    return this.#client(held.workerUrl).preview(
      this.#profileOf(held),
      held.leaseId,
      args,
      limits,
      screenshot,
    );
  }

  /**
   * The run is done with the page: closes the held lease (sealing its state when asked) and any
   * retired one (unsealed). An expired lease is not asked to close (ADR-0127 d8). Answers the held
   * lease's final view, if one was closed.
   */
  async close({ seal }: { seal: boolean }, limits: CallLimits = {}): Promise<LeaseView | undefined> {
    // The held lease is closed even when the retired one cannot be; the first failure is thrown after.
    let retiredFailure: unknown;
    try {
      await this.#closeRetired(limits);
    } catch (error) {
      retiredFailure = error;
    }
    const view = await this.#closeHeld(seal, limits);
    if (retiredFailure !== undefined) throw retiredFailure;
    return view;
  }

  async #closeHeld(seal: boolean, limits: CallLimits): Promise<LeaseView | undefined> {
    const held = this.#held;
    if (!held) return undefined;
    if (held.expiresAtMs <= this.#clock()) {
      this.#held = undefined;
      return undefined;
    }
    // Any failure but "gone already" keeps it held, to close again.
    const view = await this.#closeAt(held.workerUrl, this.#profileOf(held), held.leaseId, { seal }, limits);
    if (this.#held === held) this.#held = undefined;
    return view;
  }

  /**
   * Stops using the held lease (ADR-0127 d2, d3): an untrusted one is retired and closed, unsealed,
   * before the next acquire; an expired or revoked one is simply forgotten.
   */
  drop(reason: LeaseDropReason): void {
    const held = this.#held;
    this.#held = undefined;
    if (held && reason === 'untrusted' && held.expiresAtMs > this.#clock())
      this.#retired = { lease: held, closed: false };
  }

  async #call(
    operation: 'navigate' | 'observe' | 'act',
    limits: CallLimits,
    send: (client: DataPlaneClient, lease: HeldLease) => Promise<PageCallResult>,
  ): Promise<PageCallResult> {
    const held = this.#held;
    if (!held)
      throw new ProviderError('lease_expired', `${operation} needs a lease: acquire one first`, false, {
        operation,
      });
    let result: PageCallResult;
    try {
      result = await send(this.#client(held.workerUrl), held);
    } catch (error) {
      // The execution was stopped (its worker's stop bound): the call is handed to the run's next
      // owner with its lease, which learns its end from the lease (`handover`); nothing is judged,
      // dropped or closed here.
      if (limits.signal?.aborted) throw error;
      const failure = this.#afterFailure(error, held);
      await this.#closeRetiredWhereItCan(limits);
      throw failure;
    }
    if (result.lease.lease_id !== held.leaseId) {
      this.drop('untrusted');
      await this.#closeRetiredWhereItCan(limits);
      throw new ProviderError('outcome_unknown', `${operation} answered for another lease`, false, {
        operation,
      });
    }
    held.sequence = result.lease.sequence;
    held.expiresAtMs = result.lease.expires_at_ms;
    return result;
  }

  /** The trust rules on a failed page call (lease-trust.ts); answers the error the caller sees. */
  #afterFailure(error: unknown, held: HeldLease): unknown {
    if (this.#held !== held) return error;
    const verdict = judgeFailedPageCall(error, held.sequence);
    if (verdict.sequence !== undefined) held.sequence = verdict.sequence;
    if (verdict.drop) this.drop(verdict.drop);
    return verdict.error;
  }

  /**
   * Closes a retired lease that is still open (unsealed), keeping the held one. The run worker
   * calls it at the end of an execution whose run keeps its page: otherwise a run parked after a
   * failed close would reattach, on resume, to the very lease it stopped trusting (ADR-0127 d3).
   */
  async closeRetired(limits: CallLimits = {}): Promise<void> {
    const worker = this.#retired ? await this.#options.findWorker(this.profile) : undefined;
    await this.#closeRetired(limits, worker ? { worker } : {});
  }

  /**
   * ADR-0127 d2: a lease just dropped as untrusted is closed, unsealed, where it still can be —
   * inside the failed call's own deadline and signal. A close that fails leaves it retired, to be
   * closed before the next acquire (d3); the failed call keeps its own error.
   */
  async #closeRetiredWhereItCan(limits: CallLimits): Promise<void> {
    try {
      await this.#closeRetired(limits, { forget: false });
    } catch {
      // Still open: ensureLease closes it before acquiring again, and acquires nothing until it has.
    }
  }

  /**
   * ADR-0127 d3: a retired lease still open is closed, unsealed. Before an acquire it is closed where
   * its browser worker answers now (`worker`, the registry's, when it names the same worker), so a
   * worker that moved does not keep the provider from ever acquiring again. A close that fails
   * throws and leaves the lease retired. `forget` ends the record once the lease is closed: before
   * an acquire and at the provider's close; a drop keeps it, for {@link retiredLease}, until then.
   */
  async #closeRetired(
    limits: CallLimits,
    { worker, forget = true }: { worker?: BrowserWorkerLocation; forget?: boolean } = {},
  ): Promise<void> {
    const retired = this.#retired;
    if (!retired) return;
    const { lease } = retired;
    if (!retired.closed && lease.expiresAtMs > this.#clock()) {
      const url = worker?.id === lease.workerId ? worker.url : lease.workerUrl;
      // Anything but "gone already" keeps it retired and stops this acquire.
      await this.#closeAt(url, this.#profileOf(lease), lease.leaseId, { seal: false }, limits);
    }
    retired.closed = true;
    if (forget && this.#retired === retired) this.#retired = undefined;
  }

  /**
   * Closes a lease at the worker at `url`. A lease the service no longer knows (`lease_expired`) is
   * closed already: that answers undefined; any other failure throws.
   */
  async #closeAt(
    url: string,
    profile: ProfileRef,
    leaseId: string,
    { seal }: { seal: boolean },
    limits: CallLimits,
  ): Promise<LeaseView | undefined> {
    try {
      return await this.#client(url).close(profile, leaseId, { seal }, limits);
    } catch (error) {
      if (error instanceof ProviderError && error.code === 'lease_expired') return undefined;
      throw error;
    }
  }

  /** A held lease's profile: its id within this provider's tenant (a scope never changes tenant). */
  #profileOf(lease: HeldLease): ProfileRef {
    return { tenant: this.scope.tenant, id: lease.profileId };
  }

  #client(url: string): DataPlaneClient {
    return new DataPlaneClient({
      baseUrl: url,
      token: this.#options.token,
      ...(this.#options.fetch ? { fetch: this.#options.fetch } : {}),
    });
  }
}
