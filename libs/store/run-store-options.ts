import { checkedRetentionMs, DEFAULT_RUN_RETENTION_MS } from './run-retention.js';

/** Entries kept in one run's event stream. */
export const RUN_EVENTS_CAP = 10_000;

/** The run store's options as given; {@link compileRunStoreOptions} applies the defaults. */
export interface RunStoreOptions {
  /**
   * Epoch ms: the one clock every record's time is read from (submitted, claimed, ended, a
   * grant's expiry, a step's). Default `Date.now`; tests inject one so time moves without sleeping.
   */
  clock?: () => number;
  /**
   * Entries kept per run event stream; older ones are trimmed. Default {@link RUN_EVENTS_CAP}.
   * Too small and a client following a long run misses events it has not read yet.
   */
  eventsCap?: number;
  /**
   * How long a run's keys are kept after it ends (`config.runRetentionMs`), in ms.
   * Default thirty days. Too small and a person loses a run's steps before looking at them.
   */
  retentionMs?: number;
}

/** The options as compiled: every default applied, every value checked, frozen. */
export type CompiledRunStoreOptions = Readonly<Required<RunStoreOptions>>;

/** Checks the run store's options once, as it is built; a message names the option. */
export function compileRunStoreOptions(given: RunStoreOptions = {}): CompiledRunStoreOptions {
  const eventsCap = given.eventsCap ?? RUN_EVENTS_CAP;
  if (!Number.isInteger(eventsCap) || eventsCap < 1)
    throw new RangeError(`eventsCap: expected a positive integer, got ${eventsCap}`);
  return Object.freeze({
    clock: given.clock ?? Date.now,
    eventsCap,
    retentionMs: checkedRetentionMs(given.retentionMs ?? DEFAULT_RUN_RETENTION_MS),
  });
}
