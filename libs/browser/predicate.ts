import type { ConditionResult, ObservedElement, Predicate } from '../contracts/index.js';

/** ADR-0159: after the first read, poll at most every 250 ms and at most 20 times. */
export const POLL_INTERVAL_MS = 250;
export const MAX_POLLS = 20;

/**
 * ADR-0159: a predicate is judged on the current observation window only. Exactly one visible
 * control of that role and name in the required state is `satisfied`; several of that role and name
 * are `ambiguous`, whatever their state; anything else is `not_observed`.
 */
export function matchPredicate(
  elements: readonly ObservedElement[],
  predicate: Pick<Predicate, 'role' | 'name' | 'disabled' | 'checked'>,
): ConditionResult['result'] {
  const named = elements.filter(
    (element) => element.role === predicate.role && element.name === predicate.name,
  );
  if (named.length > 1) return 'ambiguous';
  const only = named[0];
  if (only === undefined) return 'not_observed';
  if (predicate.disabled !== undefined && (only.state.disabled ?? false) !== predicate.disabled) {
    return 'not_observed';
  }
  if (predicate.checked !== undefined && (only.state.checked ?? false) !== predicate.checked) {
    return 'not_observed';
  }
  return 'satisfied';
}

/**
 * When the next read may start: 250 ms after the previous one began, if that is still before the
 * predicate's wait ends and fewer than {@link MAX_POLLS} polls were made; otherwise null.
 */
export function nextPollAtMs(
  previousReadStartMs: number,
  pollsDone: number,
  waitEndsAtMs: number,
): number | null {
  if (pollsDone >= MAX_POLLS) return null;
  const at = previousReadStartMs + POLL_INTERVAL_MS;
  return at < waitEndsAtMs ? at : null;
}
