import { packJson, unpackJson } from './packed-json.js';
import type { RunStoreContext } from './run-keys.js';

/**
 * The run loop's own state (the loop breaker's snapshot), kept beside the run's record so the
 * record stays small; a resumed execution reads it back in any worker.
 */

/**
 * The stored state, or undefined before any was saved. Stored
 * packed (`packed-json.ts`) — its digests and invocation ids deflate well; plain JSON still reads.
 */
export async function loadLoopState(context: RunStoreContext, runId: string): Promise<unknown> {
  const stored = await context.redis.getBuffer(context.keys.loopState(runId));
  return stored && stored.length > 0 ? unpackJson(stored) : undefined;
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
    packJson(state),
  );
  return { ok: code === 'ok' };
}
