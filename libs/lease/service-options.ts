import type { Logger } from 'pino';
import { ADR_0127 } from '../config/index.js';
import type { LeaseMetrics } from '../telemetry/index.js';
import { type RedisLinkView, redisLink } from '../telemetry/redis-link.js';
import type { PageActivity } from './page-activity.js';
import type { LeaseArtifacts } from './page-artifacts.js';
import type { PageFactory } from './pages.js';
import type { LeaseCaps, LeaseStore } from './ports.js';
import { SealKeys } from './seal.js';
import type { WarmPool } from './warm-pool.js';

/** ADR-0127 d5: a lease is granted at most 15 minutes at a time and lives at most 60 minutes. */
export const DEFAULT_LEASE_CAPS: LeaseCaps = Object.freeze({
  stepMs: ADR_0127.leaseStepMs,
  lifetimeMs: ADR_0127.leaseLifetimeMs,
});

/** The lease service's options as given; {@link compileLeaseServiceOptions} applies the defaults. */
export interface LeaseServiceOptions {
  store: LeaseStore;
  pages: PageFactory;
  /** This browser worker's id: the provider reference of every lease it serves. */
  workerId: string;
  /** The profiles it serves: `*`, or pins `tenant/id` and `tenant/*` (see `pinsServe`). */
  pinnedProfiles: '*' | readonly string[];
  /** The key state is sealed with, alone or with the keys it replaced (which only open). */
  sealKey: Buffer | SealKeys;
  logger: Logger;
  metrics: LeaseMetrics;
  /**
   * Epoch ms: the one clock the service reads for a lease's times (acquired, expires, renewed,
   * closed) and a profile's. Default `Date.now`; tests inject one they move to cross the caps
   * without sleeping. A page call's own deadline is the caller's, on the wall clock.
   */
  clock?: () => number;
  /**
   * How long a lease may be granted at once and in all (ms). Default {@link DEFAULT_LEASE_CAPS}
   * (ADR-0127 d5: 15 and 60 minutes). A step too small makes the run workers renew all the time;
   * too large, and a lease of a dead run holds its profile that much longer. The lifetime is at
   * least one step.
   */
  caps?: LeaseCaps;
  /** Where the pages' screenshots go; without it, page calls answer none. */
  artifacts?: LeaseArtifacts;
  /** Ready contexts an acquire takes before it creates one; without it, none. */
  warmPool?: WarmPool;
  /** Where page calls and contexts made for acquires are counted, for the warm pool to yield to. */
  activity?: PageActivity;
  /**
   * Whether the store's own Redis answers: a page call that met an outage waits on it. Default the
   * process's link, which counts every connection the process made (another part of it may leave
   * one down to a Redis that is gone); a worker gives the view of its own (`redisLink.of`).
   */
  redisLink?: RedisLinkView;
}

/** The options as compiled: the clock and caps defaulted and checked, the seal keys built, frozen. */
export interface CompiledLeaseServiceOptions
  extends Readonly<Omit<LeaseServiceOptions, 'clock' | 'caps' | 'sealKey' | 'redisLink'>> {
  readonly clock: () => number;
  readonly redisLink: RedisLinkView;
  readonly caps: Readonly<LeaseCaps>;
  readonly sealKeys: SealKeys;
}

/** Checks the lease service's options once, as it is built; a message names the option, never a key. */
export function compileLeaseServiceOptions(options: LeaseServiceOptions): CompiledLeaseServiceOptions {
  const { clock, caps, sealKey, redisLink: link, ...rest } = options;
  if (rest.workerId.length === 0) throw new RangeError('lease service option workerId: expected an id');
  const compiledCaps = caps ?? DEFAULT_LEASE_CAPS;
  for (const name of ['stepMs', 'lifetimeMs'] as const) {
    const value = compiledCaps[name];
    if (!Number.isInteger(value) || value < 1)
      throw new RangeError(`lease service option caps.${name}: expected a positive integer, got ${value}`);
  }
  if (compiledCaps.lifetimeMs < compiledCaps.stepMs)
    throw new RangeError(
      `lease service option caps.lifetimeMs: expected at least caps.stepMs (${compiledCaps.stepMs}), got ${compiledCaps.lifetimeMs}`,
    );
  return Object.freeze({
    ...rest,
    clock: clock ?? Date.now,
    redisLink: link ?? redisLink,
    caps: Object.freeze({ ...compiledCaps }),
    sealKeys: sealKey instanceof SealKeys ? sealKey : new SealKeys(sealKey),
  });
}
