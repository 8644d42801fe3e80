import { ADR_0127 } from '../config/index.js';
import { MAX_RENEWALS_PER_REQUEST } from '../contracts/index.js';

/** ADR-0127 d5–d6: renew within five minutes of expiry, 15 minutes a step, 60 minutes a lease. */
export const LEASE_UPKEEP_DEFAULTS = Object.freeze({
  windowMs: ADR_0127.renewWindowMs,
  stepMs: ADR_0127.leaseStepMs,
  lifetimeMs: ADR_0127.leaseLifetimeMs,
  concurrency: 32,
  renewalBatchSize: MAX_RENEWALS_PER_REQUEST,
});

/** The upkeep's tunables as given: each optional, its default in {@link LEASE_UPKEEP_DEFAULTS}. */
export interface LeaseUpkeepOptions {
  /**
   * Epoch ms: the one clock a pass reads (which leases are live, which are due). Default
   * `Date.now`; tests inject one they move, the same the lease service and run store read.
   */
  clock?: () => number;
  /**
   * A lease expiring within this (ms) is renewed. Default 5 minutes (ADR-0127 d5). It must be
   * shorter than `stepMs`, or a renewal could never reach past the window; too small, and one
   * missed pass lets a lease lapse.
   */
  windowMs?: number;
  /**
   * The most one renewal may add past now (ms). Default 15 minutes, the lease service's cap: a
   * larger step is cut to it by the service, so asking for more only loses idempotency.
   */
  stepMs?: number;
  /**
   * A lease never lives past this (ms) after it was acquired. Default 60 minutes, the service's
   * cap; at least `stepMs`.
   */
  lifetimeMs?: number;
  /** Data-plane calls in flight at once. Default 32; more only loads the browser workers. */
  concurrency?: number;
  /**
   * Renewals sent to one browser worker in one request. Default and most: 150, the data
   * plane's bound; smaller only makes more requests.
   */
  renewalBatchSize?: number;
}

/** The options as compiled: every default applied, every value checked, frozen. */
export type CompiledLeaseUpkeepOptions = Readonly<Required<LeaseUpkeepOptions>>;

/**
 * Checks the upkeep's options once, at start-up (and again, at no cost, on a compiled value): a
 * message names the option and what was expected.
 */
export function compileLeaseUpkeepOptions(given: LeaseUpkeepOptions = {}): CompiledLeaseUpkeepOptions {
  const compiled = {
    clock: given.clock ?? Date.now,
    windowMs: given.windowMs ?? LEASE_UPKEEP_DEFAULTS.windowMs,
    stepMs: given.stepMs ?? LEASE_UPKEEP_DEFAULTS.stepMs,
    lifetimeMs: given.lifetimeMs ?? LEASE_UPKEEP_DEFAULTS.lifetimeMs,
    concurrency: given.concurrency ?? LEASE_UPKEEP_DEFAULTS.concurrency,
    renewalBatchSize: given.renewalBatchSize ?? LEASE_UPKEEP_DEFAULTS.renewalBatchSize,
  };
  for (const name of ['windowMs', 'stepMs', 'lifetimeMs', 'concurrency', 'renewalBatchSize'] as const) {
    const value = compiled[name];
    if (!Number.isInteger(value) || value < 1)
      throw new RangeError(`lease upkeep option ${name}: expected a positive integer, got ${value}`);
  }
  if (compiled.windowMs >= compiled.stepMs)
    throw new RangeError(
      `lease upkeep option windowMs: expected less than stepMs (${compiled.stepMs}), got ${compiled.windowMs}`,
    );
  if (compiled.lifetimeMs < compiled.stepMs)
    throw new RangeError(
      `lease upkeep option lifetimeMs: expected at least stepMs (${compiled.stepMs}), got ${compiled.lifetimeMs}`,
    );
  if (compiled.renewalBatchSize > MAX_RENEWALS_PER_REQUEST)
    throw new RangeError(
      `lease upkeep option renewalBatchSize: expected at most ${MAX_RENEWALS_PER_REQUEST} (the data plane's bound), got ${compiled.renewalBatchSize}`,
    );
  return Object.freeze(compiled);
}
