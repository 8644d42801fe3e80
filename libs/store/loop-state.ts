import type { RunStoreContext } from './run-keys.js';

/**
 * The run loop's own state (the loop breaker's snapshot), kept beside the run's record so the
 * record stays small; a resumed execution reads it back in any worker.
 */

/** The stored state, or undefined before any was saved. */
export async function loadLoopState(context: RunStoreContext, runId: string): Promise<unknown> {
  const text = await context.redis.get(context.keys.loopState(runId));
  return text ? JSON.parse(text) : undefined;
}

/** Saves the state, by the run's owner only; a lost run refuses (`ok: false`). */
export async function saveLoopState(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  state: unknown,
): Promise<{ ok: boolean }> {
  const [code] = await context.redis.saveLoopState(
    context.keys.run(runId),
    context.keys.loopState(runId),
    ownerToken,
    JSON.stringify(state),
  );
  return { ok: code === 'ok' };
}
