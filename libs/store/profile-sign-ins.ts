import { randomBytes } from 'node:crypto';
import type { ProfileRef } from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';

/**
 * A person signing a profile in by hand: no run, no model, no budget. Its lease's scope carries the
 * sign-in's id where a run's would be (`signin_…`), and the sign-in takes the profile's turn the
 * way a run does, so runs of the profile wait behind it (`waiting_for: "profile"`).
 */
export const SIGN_IN_ID_PREFIX = 'signin_';

/** The longest a sign-in lasts, however often its page beats. */
export const SIGN_IN_MAX_MS = 60 * 60_000;

export type ProfileSignInStatus = 'open' | 'done' | 'cancelled' | 'expired';

/** How long a sign-in whose end began (a crash in between) keeps its page from the next run. */
const ENDING_HOLD_MS = 60_000;

export interface ProfileSignInRecord {
  id: string;
  tenant: string;
  profileId: string;
  /** Who opened it (the principal), and so who alone may act on its page. */
  principal: string;
  url: string;
  leaseId: string;
  status: ProfileSignInStatus;
  createdAtMs: number;
  /** Its lease's expiry, moved by each heartbeat: past it, the sign-in is over and never seals. */
  expiresAtMs: number;
  endedAtMs: number | null;
}

/** Whether a profile line's holder is a sign-in, not a run. */
export function isSignInId(holderId: string): boolean {
  return holderId.startsWith(SIGN_IN_ID_PREFIX);
}

export function newSignInId(): string {
  return `${SIGN_IN_ID_PREFIX}${randomBytes(12).toString('base64url')}`;
}

/** The sign-ins' records (`signin:ID`), kept a day past their longest life. */
export class ProfileSignIns {
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {}

  #key(id: string): string {
    return `${this.prefix}signin:${id}`;
  }

  /**
   * Records a sign-in before it takes its profile's turn, `opening` until `openUntilMs`: its lease
   * and page take a second or more to open, and a sweep of the lines in that time must find it
   * holding the turn, not pass it on to a run that would meet its lease.
   */
  async begin(
    record: Omit<ProfileSignInRecord, 'leaseId' | 'status' | 'expiresAtMs' | 'endedAtMs'> & {
      openUntilMs: number;
    },
  ): Promise<void> {
    const key = this.#key(record.id);
    await this.redis
      .multi()
      .hset(key, {
        tenant: record.tenant,
        profile: record.profileId,
        principal: record.principal,
        url: record.url,
        status: 'opening',
        created_at: record.createdAtMs,
        expires_at: record.openUntilMs,
      })
      .pexpire(key, SIGN_IN_MAX_MS + 24 * 60 * 60_000)
      .exec();
  }

  /** Its page is open under `leaseId`, which expires at `expiresAtMs`: the sign-in is `open`. */
  async opened(id: string, leaseId: string, expiresAtMs: number): Promise<void> {
    await this.redis.hset(this.#key(id), { lease: leaseId, status: 'open', expires_at: expiresAtMs });
  }

  /** A sign-in that never opened (its turn refused, its page not opened): no record is kept. */
  async discard(id: string): Promise<void> {
    await this.redis.del(this.#key(id));
  }

  /** The sign-in of `tenant` by id; an expired open one reads `expired`. */
  async get(tenant: string, id: string): Promise<ProfileSignInRecord | undefined> {
    const fields = await this.redis.hgetall(this.#key(id));
    if (!fields.tenant || fields.tenant !== tenant) return undefined;
    const expiresAtMs = Number(fields.expires_at);
    // While it opens or ends, it reads as open: its page is held, its outcome not yet known.
    const stored = (
      fields.status === 'ending' || fields.status === 'opening' ? 'open' : fields.status
    ) as ProfileSignInStatus;
    return {
      id,
      tenant: fields.tenant,
      profileId: fields.profile ?? '',
      principal: fields.principal ?? '',
      url: fields.url ?? '',
      leaseId: fields.lease ?? '',
      status: stored === 'open' && this.now() >= expiresAtMs ? 'expired' : stored,
      createdAtMs: Number(fields.created_at),
      expiresAtMs,
      endedAtMs: fields.ended_at ? Number(fields.ended_at) : null,
    };
  }

  /**
   * Whether the sign-in `id` still holds its profile's page: opening within its bound, open with
   * its lease not expired, or
   * ending (its lease being closed: no run may take the page before the close is done; a crash
   * while ending lets go after a minute).
   */
  async holds(id: string): Promise<boolean> {
    const [status, expiresAt, endingAt] = await this.redis.hmget(
      this.#key(id),
      'status',
      'expires_at',
      'ending_at',
    );
    if (status === 'ending') return this.now() - Number(endingAt) < ENDING_HOLD_MS;
    return (status === 'open' || status === 'opening') && this.now() < Number(expiresAt);
  }

  /** A heartbeat renewed its lease to `expiresAtMs`. */
  async extend(id: string, expiresAtMs: number): Promise<void> {
    await this.redis.hset(this.#key(id), 'expires_at', expiresAtMs);
  }

  /** A sign-in ended `done` and sealed: the profile was last signed in now, by `principal`. */
  async noteSignedIn(profile: ProfileRef, principal: string): Promise<void> {
    await this.redis.hset(this.#lastKey(profile), { at: this.now(), by: principal });
  }

  /** When and by whom each profile was last signed in by hand (null: never). */
  async lastSignedIn(profiles: readonly ProfileRef[]): Promise<Array<{ at_ms: number; by: string } | null>> {
    return Promise.all(
      profiles.map(async (profile) => {
        const [at, by] = await this.redis.hmget(this.#lastKey(profile), 'at', 'by');
        return at && by ? { at_ms: Number(at), by } : null;
      }),
    );
  }

  #lastKey(profile: ProfileRef): string {
    return `${this.prefix}signin-last:{prf:${profile.tenant}/${profile.id}}`;
  }

  /** Begins a sign-in's end, once: false when it had begun already. It holds the page until `ended`. */
  async beginEnd(id: string): Promise<boolean> {
    const key = this.#key(id);
    if ((await this.redis.hsetnx(key, 'ending_at', this.now())) === 0) return false;
    await this.redis.hset(key, 'status', 'ending');
    return true;
  }

  /** The sign-in's end is done (its lease closed, or gone): it no longer holds the page. */
  async ended(id: string, status: Exclude<ProfileSignInStatus, 'open'>): Promise<void> {
    await this.redis.hset(this.#key(id), { status, ended_at: this.now() });
  }
}
