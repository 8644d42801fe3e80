import type { Logger } from 'pino';
import { WARM_CONTEXT_ESTIMATE_MB } from '../config/index.js';
import type { ProfileRef } from '../contracts/index.js';
import { profileLabel } from '../contracts/index.js';
import type { PageActivity } from './page-activity.js';
import type { PageFactory, PageSession } from './pages.js';
import type { LeaseStore } from './ports.js';
import { type SealKeys, unsealState } from './seal.js';

/** How many warm contexts a browser worker keeps, per profile and in all. */
export interface WarmPoolLimits {
  /** Ready contexts per profile (BROWSER_WARM_CONTEXTS). */
  perProfile: number;
  /** Their memory in all, MiB (BROWSER_WARM_POOL_MB), at WARM_CONTEXT_ESTIMATE_MB a context. */
  poolMb: number;
}

export interface WarmPoolOptions {
  pages: PageFactory;
  store: Pick<LeaseStore, 'getProfile'>;
  /** The key state is sealed with, alone or with the keys it replaced. */
  sealKey: Buffer | SealKeys;
  limits: WarmPoolLimits;
  logger: Logger;
  /** The leases' page calls: a context is made only while they are quiet. Without it, at once. */
  activity?: PageActivity;
}

/** A context warmed from one version of its profile's sealed state. */
interface WarmContext {
  sealVersion: string;
  session: PageSession;
}

interface ProfilePool {
  profile: ProfileRef;
  ready: WarmContext[];
  /** Refills stop for a profile whose warming failed, until it is asked for again. */
  failed: boolean;
}

/**
 * Each browser worker keeps a few ready contexts of the profiles it serves — a context
 * and its page, made by the same factory as a lease's (sealed state restored, origin guard
 * attached) — so an acquire hands one over instead of creating it.
 *
 * - A context is kept with the seal version it was restored from, and handed over only for that
 *   version: a profile sealed again since it was warmed never gets it (it is disposed).
 * - Refills run in the background, one context at a time, each once the leases' page calls are
 *   quiet (`activity`), and never hold up an acquire: `take` answers at once, with a context or
 *   with none (the acquire then creates its own).
 * - Bounded per profile (`perProfile`) and in all (`poolMb` ÷ WARM_CONTEXT_ESTIMATE_MB).
 * - A profile is warmed once it is asked for here (`want`): a pinned one at start, any other on
 *   its first acquire.
 */
export class WarmPool {
  readonly #pools = new Map<string, ProfilePool>();
  readonly #maxContexts: number;
  readonly #log: Logger;
  #filling: Promise<void> | undefined;
  #closed = false;

  constructor(private readonly options: WarmPoolOptions) {
    this.#maxContexts = Math.floor(options.limits.poolMb / WARM_CONTEXT_ESTIMATE_MB);
    this.#log = options.logger.child({ component: 'warm-pool' });
  }

  /** Contexts ready now, in all or for one profile. */
  size(profile?: ProfileRef): number {
    if (profile) return this.#pools.get(profileLabel(profile))?.ready.length ?? 0;
    let total = 0;
    for (const pool of this.#pools.values()) total += pool.ready.length;
    return total;
  }

  /** The most contexts it keeps in all (the memory bound as a count). */
  get maxContexts(): number {
    return this.#maxContexts;
  }

  /**
   * A ready context of `profile` restored from `sealVersion`, or undefined, at once. Contexts of
   * another version are disposed. The caller refills with `want` once its acquire is answered.
   */
  take(profile: ProfileRef, sealVersion: string): PageSession | undefined {
    const pool = this.#pools.get(profileLabel(profile));
    if (!pool) return undefined;
    const stale = pool.ready.filter((warm) => warm.sealVersion !== sealVersion);
    pool.ready = pool.ready.filter((warm) => warm.sealVersion === sealVersion);
    for (const warm of stale) this.#dispose(warm);
    return pool.ready.shift()?.session;
  }

  /** Keeps `profile` warm from now on (a pinned profile at start; any other on its first acquire). */
  want(profile: ProfileRef): void {
    this.#pool(profile);
    this.#refill();
  }

  /**
   * The profile was sealed (by a lease closed here): every context it has is of an older version,
   * so they go now, and new ones are made from the new state.
   */
  resealed(profile: ProfileRef): void {
    const pool = this.#pool(profile);
    const stale = pool.ready;
    pool.ready = [];
    for (const warm of stale) this.#dispose(warm);
    this.#refill();
  }

  /** Resolves once no refill is under way (benchmarks and tests wait for a full pool with it). */
  async settled(): Promise<void> {
    while (this.#filling) await this.#filling;
  }

  /** Disposes every ready context; refills stop for good. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#filling;
    await this.drain();
  }

  /** Disposes every ready context now (the pool refills on the next acquire or seal). */
  async drain(): Promise<void> {
    const all = [...this.#pools.values()].flatMap((pool) => {
      const ready = pool.ready;
      pool.ready = [];
      return ready;
    });
    await Promise.all(all.map((warm) => warm.session.dispose().catch(() => undefined)));
  }

  /** Makes every profile's contexts again (after Chromium was started again), failed ones too. */
  rewarm(): void {
    for (const pool of this.#pools.values()) pool.failed = false;
    this.#refill();
  }

  #pool(profile: ProfileRef): ProfilePool {
    const label = profileLabel(profile);
    let pool = this.#pools.get(label);
    if (!pool) {
      pool = { profile: { tenant: profile.tenant, id: profile.id }, ready: [], failed: false };
      this.#pools.set(label, pool);
    } else pool.failed = false;
    return pool;
  }

  #dispose(warm: WarmContext): void {
    warm.session
      .dispose()
      .catch((error: unknown) => this.#log.warn({ err: error }, 'warm context dispose failed'));
  }

  /** Starts the one refill loop unless it runs already. */
  #refill(): void {
    if (this.#filling || this.#closed) return;
    this.#filling = this.#fill()
      .catch((error: unknown) => this.#log.error({ err: error }, 'warm pool refill stopped'))
      .finally(() => {
        this.#filling = undefined;
      });
  }

  /** The profile that most needs a context (fewest ready), or undefined when all are full or bounded. */
  #nextToFill(): ProfilePool | undefined {
    if (this.size() >= this.#maxContexts) return undefined;
    let next: ProfilePool | undefined;
    for (const pool of this.#pools.values()) {
      if (pool.failed || pool.ready.length >= this.options.limits.perProfile) continue;
      if (!next || pool.ready.length < next.ready.length) next = pool;
    }
    return next;
  }

  async #fill(): Promise<void> {
    while (!this.#closed && this.#nextToFill()) {
      // A live lease's page comes first: each context waits for a quiet moment of the pages.
      await this.options.activity?.whenQuiet(() => this.#closed);
      const pool = this.#nextToFill();
      if (!pool || this.#closed) return;
      try {
        await this.#warmOne(pool);
      } catch (error) {
        pool.failed = true;
        this.#log.warn({ err: error, profile_id: pool.profile.id }, 'a warm context could not be made');
      }
    }
  }

  async #warmOne(pool: ProfilePool): Promise<void> {
    // The settings, the sealed state and its version come from one read, so the context is named
    // by the version it was restored from whatever seals happen meanwhile.
    const stored = await this.options.store.getProfile(pool.profile);
    if (!stored) {
      pool.failed = true;
      return;
    }
    const storageState = stored.sealedBlob
      ? unsealState(stored.sealedBlob, this.options.sealKey, profileLabel(pool.profile))
      : undefined;
    const session = await this.options.pages.open({
      profileId: stored.id,
      allowedOrigins: stored.allowedOrigins,
      frameOrigins: stored.frameOrigins,
      subresources: stored.subresources,
      storageState,
    });
    if (this.#closed) {
      await session.dispose().catch(() => undefined);
      return;
    }
    // Versions only move forward, and this one was read last: ready contexts of another are older.
    const stale = pool.ready.filter((warm) => warm.sealVersion !== stored.sealVersion);
    pool.ready = pool.ready.filter((warm) => warm.sealVersion === stored.sealVersion);
    for (const warm of stale) this.#dispose(warm);
    pool.ready.push({ sealVersion: stored.sealVersion, session });
  }
}
