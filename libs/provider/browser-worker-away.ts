import { LeaseholdError } from '../contracts/index.js';
import { ProviderError } from './errors.js';

/**
 * The profile's browser worker is gone from the registry, or its address refuses every
 * acquisition attempt (it is restarting, 5–7 s — longer than ADR-0177's bounded retry). Not the
 * tool's outcome: it escapes the call, and the run worker hands the run back `queued` with
 * `waiting_for: "browser_worker"` (a bounded number of times) without recording a tool result, so
 * the same invocation acquires again in the next execution. Never thrown once a page call was
 * dispatched: only before an acquisition.
 */
export class BrowserWorkerAway extends LeaseholdError<'provider_unavailable'> {
  override readonly name = 'BrowserWorkerAway';
  readonly waitingFor = 'browser_worker' as const;
  constructor(message: string, options?: { cause?: unknown }) {
    super('provider_unavailable', message, true, options);
  }
}

/** Whether an exhausted acquisition never reached a browser worker at all (nothing listens there). */
export function neverConnected(error: unknown): boolean {
  return (
    error instanceof ProviderError &&
    error.code === 'provider_unavailable' &&
    error.transport === 'not_connected'
  );
}
