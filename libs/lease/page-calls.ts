import { NavigationFailedError, type OperationLimits } from '../browser/index.js';
import type { LeaseCloseReason, LeaseView, ProfileRef } from '../contracts/index.js';
import type { LeaseMetrics } from '../telemetry/index.js';
import { DataPlaneError } from './errors.js';
import type { HeldLease } from './held-lease.js';
import { readLeaseView } from './lease-views.js';
import { type LeaseArtifacts, storeCapture } from './page-artifacts.js';
import type { PageResult, PageSession } from './pages.js';
import type { LeaseRecord, LeaseStore } from './ports.js';
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
  /** Issue 13: where screenshots go; without it, calls answer none. */
  artifacts?: LeaseArtifacts | undefined;
}

/**
 * The page routes of a held lease (DESIGN §5): navigate and act are effects fenced by the action
 * sequence, observe is not; calls on one lease run one at a time, so sequence checks and effects
 * never interleave.
 */
export class LeasePageCalls {
  readonly #deps: LeasePageCallsDeps;

  constructor(deps: LeasePageCallsDeps) {
    this.#deps = deps;
  }

  navigate(profile: ProfileRef, leaseId: string, sequence: number, url: string, limits: OperationLimits) {
    return this.#effect(profile, leaseId, sequence, (session, beforeDispatch) =>
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
    return this.#effect(profile, leaseId, sequence, (session, beforeDispatch) =>
      session.act(args, limits, beforeDispatch),
    );
  }

  observe(profile: ProfileRef, leaseId: string, args: Record<string, unknown>, limits: OperationLimits) {
    return this.#serially(profile, leaseId, async (session) => {
      await this.#requireLive(profile, leaseId);
      const result = await session.observe(args, limits);
      return { lease: await this.#view(profile, leaseId), result };
    });
  }

  /**
   * Issue 13 (approval cards): the viewport with an observed element outlined, stored as an
   * artifact of the lease's run. Not an effect: no sequence, nothing dispatched. A capture or write
   * that fails answers no screenshot; a stale revision or a missing element is refused as for act.
   */
  preview(
    profile: ProfileRef,
    leaseId: string,
    args: { revision: string; element: string },
    limits: OperationLimits,
  ) {
    return this.#serially(profile, leaseId, async (session) => {
      const lease = await this.#requireLive(profile, leaseId);
      const capture = session.preview
        ? await session.preview(args, limits)
        : ({ ok: false, reason: 'error' } as const);
      const artifacts = await storeCapture(this.#deps.artifacts, lease.scope, capture, 'preview');
      return { lease: await this.#view(profile, leaseId), artifacts };
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
    run: (session: PageSession, beforeDispatch: () => Promise<void>) => Promise<PageResult>,
  ) {
    return this.#serially(profile, leaseId, async (session) => {
      const lease = await this.#requireLive(profile, leaseId);
      await this.#fence(profile, leaseId, sequence, false);
      let dispatched = false;
      let result: PageResult;
      try {
        result = await run(session, async () => {
          await this.#fence(profile, leaseId, sequence, true);
          dispatched = true;
        });
      } catch (error) {
        if (error instanceof NavigationFailedError && dispatched) {
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
        throw toldRefusal(error, dispatched, sequence);
      }
      if (!dispatched) throw new Error('the page engine answered an effect without dispatching it');
      const { screenshot, ...answered } = result;
      const artifacts = await storeCapture(this.#deps.artifacts, lease.scope, screenshot, 'shot');
      return { lease: await this.#view(profile, leaseId), result: { ...answered, artifacts } };
    });
  }

  async #fence(profile: ProfileRef, leaseId: string, sequence: number, advance: boolean): Promise<void> {
    const outcome = await this.#deps.store.advanceSequence(
      profile,
      leaseId,
      sequence,
      this.#deps.clock(),
      advance,
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

  async #serially<T>(
    profile: ProfileRef,
    leaseId: string,
    run: (session: PageSession) => Promise<T>,
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
    const next = held.tail.then(async () => run(await held.session));
    held.tail = next.catch(() => undefined);
    return next;
  }

  #view(profile: ProfileRef, leaseId: string): Promise<LeaseView> {
    return readLeaseView(this.#deps.store, profile, leaseId);
  }
}
