import type { LeaseScope, ProfileRef } from '../contracts/index.js';
import type { AcquireAttemptDiagnostic, AcquireRetryPolicy } from './acquire-retry.js';

/** Where a browser worker answers: its id (a lease's provider reference) and its data-plane URL. */
export interface BrowserWorkerLocation {
  id: string;
  url: string;
}

/** The lease a provider holds, as the run record keeps it. */
export interface HeldLease {
  leaseId: string;
  profileId: string;
  /** The browser worker serving it (the lease's provider reference) and its URL. */
  workerId: string;
  workerUrl: string;
  acquiredAtMs: number;
  expiresAtMs: number;
  /** The last applied action's sequence; the next navigate or act carries `sequence + 1`. */
  sequence: number;
}

export interface BrowserLeaseProviderOptions {
  /** The run's lease scope: tenant, principal, run id and attempt (ADR-0127 d1). */
  scope: LeaseScope;
  /** The profile the run's session is bound to, an id within the scope's tenant (DESIGN §3). */
  profileId: string;
  /** The live browser worker serving a profile (backed by `BrowserWorkerRegistry.findForProfile`). */
  findWorker: (profile: ProfileRef) => Promise<BrowserWorkerLocation | undefined>;
  /** The data-plane token shared with the browser workers. */
  token: string;
  /** Epoch ms, to judge a held lease's expiry; `Date.now` unless a test moves time. */
  clock?: () => number;
  /** Tests: another fetch. */
  fetch?: typeof fetch;
  /**
   * The acquisition recovery policy (ADR-0177). Production composition passes
   * `BOUNDED_ACQUIRE_RETRY` (three attempts, 0.25–0.5 s then 0.5–1 s); the default is a single
   * attempt, as an independently constructed provider may keep. Checked at construction.
   */
  acquireRetry?: AcquireRetryPolicy;
  /**
   * Awaited after each failed acquisition attempt with a bounded, content-free diagnostic, for the
   * run's events (ADR-0177). A throw (say, the run was lost) ends the acquisition with that error.
   */
  onAcquireAttempt?: (diagnostic: AcquireAttemptDiagnostic) => Promise<void> | void;
  /**
   * Whether the run holding another run's live lease on the profile still needs its page (ADR-0127
   * d7): true while it is running, queued to resume or parked on its own approval. The run worker
   * passes one backed by the run store (libs/provider reads no run state itself). While it answers
   * true a newcomer is refused `profile_unavailable`; once it answers false, the newcomer seals and
   * closes that lease and acquires once more. Without a reader the lease is always replaced, so a
   * provider that shares a profile with runs still in progress must be given one. A reader that
   * throws leaves the page with its holder.
   */
  holderNeedsPage?: (runId: string) => Promise<boolean>;
  /**
   * Awaited after each acquisition that gave the run a lease (a new one or a reattach), before the
   * lease is used: the run worker notes it in its own upkeep index (ADR-0127 d6). A throw fails the
   * call as an acquire failure would, so a lease no upkeep knows is never relied on.
   */
  onLeaseHeld?: (lease: Readonly<HeldLease>) => Promise<void> | void;
}

/** Why a held lease stops being used. */
export type LeaseDropReason = 'untrusted' | 'expired';

/** The lease an effect is sent on and the sequence it carries: what a run's next owner asks about. */
export interface DispatchedEffect {
  leaseId: string;
  sequence: number;
}
