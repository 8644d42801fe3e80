import { assertNever } from '../contracts/index.js';
import { ProviderError, refusedAfterDispatch } from './errors.js';
import type { LeaseDropReason } from './lease-provider-options.js';

/** What a failed page call means for the held lease (ADR-0127 d2, d3). */
export interface FailedPageCallVerdict {
  /** The error the caller sees. */
  error: unknown;
  /** Set when the held lease stops being used, and why. */
  drop?: LeaseDropReason;
  /** The lease's last action as the service told it, when a dispatched refusal moved it. */
  sequence?: number;
}

/**
 * The trust rules on a failed page call of a lease whose last action is `sequence`: answers the
 * error the caller sees, whether the lease is dropped, and where its sequence now stands.
 */
export function judgeFailedPageCall(error: unknown, sequence: number): FailedPageCallVerdict {
  // ADR-0127 d2: any unexpected failure drops the lease.
  if (!(error instanceof ProviderError)) return { error, drop: 'untrusted' };
  switch (error.code) {
    case 'page_changed':
    case 'element_not_found':
    case 'action_not_allowed':
    case 'url_disallowed':
    case 'grant_not_applicable':
    case 'invalid_arguments':
    case 'secret_not_allowed':
      if (refusedAfterDispatch(error)) return judgeDispatchedRefusal(error, sequence);
      // Refused before dispatch: nothing happened, the lease and its sequence stay as they were.
      return { error };
    case 'navigation_failed':
      // No server saw the request; the service says where the sequence now stands and the lease
      // stays trusted. Without that word the two sides may disagree: untrusted, as for any refusal.
      if (refusedAfterDispatch(error)) return judgeDispatchedRefusal(error, sequence);
      return { error };
    case 'lease_expired':
      return { error, drop: 'expired' };
    case 'sequence_mismatch':
      // Not reachable from an effect (the client reports it as outcome_unknown); desynchronised all the same.
      return {
        error: new ProviderError('outcome_unknown', error.message, false, {
          operation: error.operation,
          ...(error.serviceCode === undefined ? {} : { serviceCode: error.serviceCode }),
          cause: error,
        }),
        drop: 'untrusted',
      };
    case 'outcome_unknown':
    case 'profile_unavailable':
    case 'provider_unavailable':
    // Only acquisition answers these (no lease was had); a page call that did would be as lost.
    case 'seal_key_mismatch':
    case 'profile_unreadable':
      // ADR-0127 d2, d3: the lease cannot be trusted any more; never retry, start afresh next call.
      return { error, drop: 'untrusted' };
    default:
      return assertNever(error.code, 'provider error code');
  }
}

/**
 * The service dispatched the effect, then the page refused it (a click whose navigation the origin
 * guard blocked), and told the lease's sequence: the run side moves its own with it and keeps the
 * lease. A sequence other than the one this call carried means the two sides disagree: untrusted.
 */
function judgeDispatchedRefusal(error: ProviderError, sequence: number): FailedPageCallVerdict {
  const told = error.facts.sequence;
  if (told === sequence + 1) return { error, sequence: told };
  return {
    error: new ProviderError('outcome_unknown', `${error.message}, at an unexpected sequence`, false, {
      operation: error.operation,
      ...(error.serviceCode === undefined ? {} : { serviceCode: error.serviceCode }),
      facts: { ...error.facts },
      cause: error,
    }),
    drop: 'untrusted',
  };
}
