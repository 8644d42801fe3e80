/**
 * What a stop hands back, and then closes, after the drain: `closeWorker`'s hand-back grace (1 s)
 * and the closes of the upkeep and connections behind it.
 */
const HAND_BACK_BUDGET_MS = 1_500;

/**
 * A stop hands runs on: the drain lasts 80% of the shutdown bound, but never so long
 * that the hand-back after it would meet the forced exit (a run left owned by a departed worker).
 */
export function drainBoundMs(shutdownTimeoutMs: number): number {
  return Math.max(0, Math.min(shutdownTimeoutMs * 0.8, shutdownTimeoutMs - HAND_BACK_BUDGET_MS));
}
