import type { RunStoreContext } from './run-keys.js';

/** Thirty days: `RUN_RETENTION_DAYS`' default, for a store built without the config. */
export const DEFAULT_RUN_RETENTION_MS = 30 * 86_400_000;

/**
 * The KEYS of a script that may end a run (or, for a retry, take it back from its end): the
 * script's `own` keys first, as its header numbers them, then every other key the run owns, and
 * the number of them ahead, as EVAL takes it (scripts.ts, `+` files). The end scripts set those
 * keys' expiry in the same step as the end.
 *
 * `attempts` is the run's attempt count, which names its earlier attempts' transcripts; without
 * it, it is read from the record. It cannot move under the caller: only a retry changes it, and
 * a retry starts from `failed`, an end, while every script that ends a run starts from a status
 * that is not one.
 */
export async function runScriptKeys(
  context: RunStoreContext,
  runId: string,
  own: readonly string[],
  attempts?: number,
): Promise<[number, ...string[]]> {
  const known = attempts ?? (Number(await context.redis.hget(context.keys.run(runId), 'attempt')) || 1);
  const others = context.keys.runOwned(runId, known).filter((key) => !own.includes(key));
  const keys = [...own, ...others];
  return [keys.length, ...keys];
}

/** Checks a retention from the config or a test: a whole number of milliseconds, at least one. */
export function checkedRetentionMs(retentionMs: number): number {
  if (!Number.isInteger(retentionMs) || retentionMs < 1)
    throw new RangeError(`retentionMs: expected a positive integer (ms), got ${retentionMs}`);
  return retentionMs;
}
