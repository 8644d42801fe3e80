import type { LeaseScope } from '../contracts/index.js';
import { ProviderError } from './errors.js';

/** Another run's live lease an acquire met: who holds it, and which lease. */
export interface ConflictingHolder {
  runId: string;
  leaseId: string;
}

/**
 * ADR-0127 d7: the holder whose lease a refused acquire may replace — another run's, named by the
 * service, that no longer needs its page (or no reader is configured). Undefined keeps the refusal.
 * `scope` is the acquiring run's; `holderNeedsPage` is the provider's reader, if it was given one.
 */
export async function replaceableHolder(
  error: unknown,
  scope: LeaseScope,
  holderNeedsPage: ((runId: string) => Promise<boolean>) | undefined,
): Promise<ConflictingHolder | undefined> {
  if (!(error instanceof ProviderError)) return undefined;
  if (error.operation !== 'acquire' || error.serviceCode !== 'profile_unavailable') return undefined;
  const runId = error.facts.holder_run_id;
  // Refused for another reason (protected, not served): no holder, nothing to replace.
  if (typeof runId !== 'string') return undefined;
  const leaseId = error.facts.holder_lease_id;
  if (runId === scope.run_id) {
    // An earlier attempt of this same run ended (a retry starts only from a failed run), so its
    // page is ended with it even while its execution is still closing it: sealed and replaced, as
    // d7 does for an ended run. The same attempt is never replaced: that one still runs.
    const attempt = error.facts.holder_attempt;
    const earlier = typeof attempt === 'number' && attempt < scope.attempt;
    return earlier && typeof leaseId === 'string' ? { runId, leaseId } : undefined;
  }
  if (holderNeedsPage) {
    try {
      if (await holderNeedsPage(runId)) return undefined;
    } catch {
      // The holder's state is unknown: sealing a page it may still need is the fault d7 forbids.
      return undefined;
    }
  }
  // A lease the service does not name cannot be closed: the refusal stands.
  return typeof leaseId === 'string' ? { runId, leaseId } : undefined;
}
