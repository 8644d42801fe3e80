import type { LeaseView, ProfileRef } from '../contracts/index.js';
import type { PageSession } from './pages.js';

/** A lease whose browser context this process holds. */
export interface HeldLease {
  profile: ProfileRef;
  session: Promise<PageSession>;
  /** Calls on one lease run one at a time, so sequence checks and effects never interleave. */
  tail: Promise<unknown>;
  closing?: Promise<LeaseView>;
  /** DESIGN §12: whether the run's declared secrets were told to the page (once per lease). */
  secretsTold?: boolean;
}
