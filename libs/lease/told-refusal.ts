import { BrowserToolError, CaptureTimedOutError } from '../browser/index.js';
import { DataPlaneError } from './errors.js';

/**
 * The page engine's refusals whose effect the service knows: before dispatch
 * nothing happened; after it the action left but the page refused its consequence (a navigation to
 * a disallowed origin blocked by the origin guard, a key Playwright would not press).
 */
const TOLD_REFUSALS: ReadonlySet<string> = new Set([
  'page_changed',
  'element_not_found',
  'action_not_allowed',
  'url_disallowed',
  'invalid_arguments',
  'secret_not_allowed',
]);

/**
 * An effect's refusal as the data plane answers it: `dispatched` says whether the sequence advanced
 * and, when it did, `sequence` is the lease's last action, so the run side moves its own sequence
 * with it instead of taking the answer for an unknown outcome and dropping the lease. Any other
 * failure keeps its meaning (an unknown outcome stays unknown).
 */
export function toldRefusal(error: unknown, dispatched: boolean, sequence: number): unknown {
  if (!(error instanceof BrowserToolError) || !TOLD_REFUSALS.has(error.code)) return error;
  const code = error.code as
    | 'page_changed'
    | 'element_not_found'
    | 'action_not_allowed'
    | 'url_disallowed'
    | 'invalid_arguments'
    | 'secret_not_allowed';
  // ADR-0159: the settled page's capture cut off by the deadline; the caller says so, not "changed".
  const timedOut: Record<string, boolean> =
    error instanceof CaptureTimedOutError ? { capture_timed_out: true } : {};
  return new DataPlaneError(
    code,
    error.message,
    dispatched ? { dispatched, sequence, ...timedOut } : { dispatched, ...timedOut },
    { cause: error },
  );
}
