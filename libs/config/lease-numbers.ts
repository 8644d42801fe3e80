/**
 * The numbers of ADR-0127, in one home: what a lease is granted, how long it lives, when
 * the upkeep renews it and how often the upkeep passes. The lease service, the upkeep and the
 * configuration's checks read them here; tests shrink them through their own options.
 */
export const ADR_0127 = Object.freeze({
  /** d5: a lease is granted (acquired or renewed) at most 15 minutes at a time. */
  leaseStepMs: 15 * 60_000,
  /** d5: a lease lives at most 60 minutes after it was acquired. */
  leaseLifetimeMs: 60 * 60_000,
  /** d6: the upkeep renews leases due within five minutes. */
  renewWindowMs: 5 * 60_000,
  /** d6: the upkeep passes once a minute beside the claim loop. */
  upkeepIntervalMs: 60_000,
});

/**
 * What one warm browser context (a context and its blank page) is taken to cost, in MiB,
 * when BROWSER_WARM_POOL_MB is turned into a number of contexts: about what the lease bench reports
 * for an idle lease's context (`rss_per_lease_mb`, proportional set size of Chromium's processes);
 * its `warm_pool_mb` reports what a full pool really takes.
 */
export const WARM_CONTEXT_ESTIMATE_MB = 48;
