import type { LeaseView, ProfileRef } from '../contracts/index.js';
import type { LiveFeed } from './live-feed.js';
import type { PageSession } from './pages.js';

/** A lease whose browser context this process holds. */
export interface HeldLease {
  profile: ProfileRef;
  session: Promise<PageSession>;
  /** Calls on one lease run one at a time, so sequence checks and effects never interleave. */
  tail: Promise<unknown>;
  /**
   * The work the latest answered call left for after its answer (its screenshot), earlier calls'
   * before it: what a deliberate close waits for. Calls still under way are not in it.
   */
  afterAnswer?: Promise<unknown>;
  closing?: Promise<LeaseView>;
  /** DESIGN §12: whether the run's declared secrets were told to the page (once per lease). */
  secretsTold?: boolean;
  /** The person who holds the page, while they do: the agent's page calls are refused meanwhile. */
  person?: PersonHold;
  /** The live view's viewers and screencast; made for the first viewer. */
  live?: LiveFeed;
}

/** A person's hold on a lease's page (person control). */
export interface PersonHold {
  holder: string;
  sinceMs: number;
  /** The hold ends by itself here (the service's clock). */
  untilMs: number;
  /** How many input events the person sent; never what they were. */
  inputs: number;
  /** The lease's last action as the hold last moved it (one round trip for the next batch). */
  sequence: number;
}

/** Whether a person holds the page now. */
export function personHolds(held: HeldLease, nowMs: number): held is HeldLease & { person: PersonHold } {
  return held.person !== undefined && held.person.untilMs > nowMs;
}

/**
 * Runs `work` after the lease's calls in flight and queued, before any later one (the calls of one
 * lease run one at a time); its failure is the caller's, never the next call's.
 */
export function afterLeaseCalls<T>(held: HeldLease, work: () => Promise<T>): Promise<T> {
  const next = held.tail.then(work);
  held.tail = next.catch(() => undefined);
  return next;
}
