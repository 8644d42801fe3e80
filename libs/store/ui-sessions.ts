import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from '../contracts/canonical-json.js';
import { type ApiKeyIdentity, apiKeyIdentitySchema } from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/** How long a person stays signed in to the run pages: a working day, then the key again. */
export const UI_SESSION_TTL_MS = 12 * 3600_000;

/** Sessions one key holds by default (UI_SESSIONS_PER_KEY). */
export const UI_SESSIONS_PER_KEY = 5;

export interface UiSessionOptions {
  /** A session's life (default {@link UI_SESSION_TTL_MS}). */
  ttlMs?: number;
  /** Sessions one key holds; a new one past it ends the key's oldest (default {@link UI_SESSIONS_PER_KEY}). */
  maxPerKey?: number;
  now?: () => number;
}

/** A signed-in browser: who it acts as (read fresh from the key), and the token its writes carry. */
export interface UiSession {
  identity: ApiKeyIdentity;
  csrfToken: string;
  expiresAtMs: number;
}

/** What one session record holds: the key's hash, never the key; the CSRF token; the end. */
interface SessionFields {
  key_hash?: string;
  csrf_token?: string;
  expires_at_ms?: string;
}

/**
 * The run pages' sign-in sessions: a person presents an API key once, and the browser
 * holds a random session id in an HttpOnly cookie instead of the key. The record is named by the
 * id's SHA-256, so a leaked store yields no cookie that works, and holds the key's hash, so each
 * request reads the key's record afresh: a revoked key ends every session it opened, and a key's
 * scopes are the session's scopes at every request. Redis expires the record with the session.
 *
 * A key holds at most `maxPerKey` sessions: an index per key (a sorted set of the records' names
 * by expiry) counts them, and a sign-in past the bound ends the key's oldest, so signing in again
 * and again never piles up records.
 */
export class UiSessions {
  private readonly keys: RunKeys;
  private readonly ttlMs: number;
  private readonly maxPerKey: number;
  private readonly now: () => number;

  constructor(
    private readonly redis: RedisClient,
    private readonly keyPrefix: string,
    options: UiSessionOptions = {},
  ) {
    this.keys = new RunKeys(keyPrefix);
    this.ttlMs = options.ttlMs ?? UI_SESSION_TTL_MS;
    this.maxPerKey = options.maxPerKey ?? UI_SESSIONS_PER_KEY;
    this.now = options.now ?? Date.now;
  }

  /** A record's name: the session id's hash (also its member in the key's index). */
  private recordName(sessionId: string): string {
    return sha256Hex(sessionId);
  }

  private recordKey(sessionId: string): string {
    return this.recordKeyOf(this.recordName(sessionId));
  }

  private recordKeyOf(name: string): string {
    return `${this.keyPrefix}ui-session:${name}`;
  }

  /** Sorted set: the names of one key's session records, scored by their expiry (epoch ms). */
  private indexKey(keyHash: string): string {
    return `${this.keyPrefix}ui-sessions:${keyHash}`;
  }

  /** Opens a session for a presented API key; answers the cookie's id, or undefined for a wrong key. */
  async open(presentedKey: string): Promise<{ sessionId: string; session: UiSession } | undefined> {
    if (!presentedKey.startsWith('lhk_') || presentedKey.length > 128) return undefined;
    const keyHash = sha256Hex(presentedKey);
    const identity = await this.identityOfKeyHash(keyHash);
    if (!identity) return undefined;
    const sessionId = randomBytes(32).toString('base64url');
    const csrfToken = randomBytes(24).toString('base64url');
    const expiresAtMs = this.now() + this.ttlMs;
    const key = this.recordKey(sessionId);
    await this.redis
      .multi()
      .hset(key, { key_hash: keyHash, csrf_token: csrfToken, expires_at_ms: String(expiresAtMs) })
      .pexpire(key, this.ttlMs)
      .exec();
    await this.endOldest(keyHash, this.recordName(sessionId), expiresAtMs);
    return { sessionId, session: { identity, csrfToken, expiresAtMs } };
  }

  /**
   * Counts a new session in its key's index and ends the oldest past the bound, in one MULTI on
   * the index (expired names dropped, the new one added, all but the newest `maxPerKey` read and
   * removed); then their records are deleted, each in its own slot on a cluster.
   */
  private async endOldest(keyHash: string, name: string, expiresAtMs: number): Promise<void> {
    const index = this.indexKey(keyHash);
    const beyond = -(this.maxPerKey + 1);
    const replies = await this.redis
      .multi()
      .zremrangebyscore(index, '-inf', this.now())
      .zadd(index, expiresAtMs, name)
      .zrange(index, 0, beyond)
      .zremrangebyrank(index, 0, beyond)
      .pexpire(index, this.ttlMs)
      .exec();
    const ended = (replies?.[2]?.[1] ?? []) as string[];
    if (ended.length === 0) return;
    const batch = slotBatch(this.redis);
    for (const endedName of ended) batch.del(this.recordKeyOf(endedName));
    await batch.exec();
  }

  /** The live session behind a cookie's id, or undefined: unknown, expired, or its key revoked. */
  async resolve(sessionId: string): Promise<UiSession | undefined> {
    if (!/^[A-Za-z0-9_-]{43}$/.test(sessionId)) return undefined;
    const fields = (await this.redis.hgetall(this.recordKey(sessionId))) as SessionFields;
    if (!fields.key_hash || !fields.csrf_token) return undefined;
    const expiresAtMs = Number(fields.expires_at_ms ?? 0);
    if (expiresAtMs <= this.now()) return undefined;
    const identity = await this.identityOfKeyHash(fields.key_hash);
    if (!identity) {
      // The key is gone: so is every session it opened, the first time each is presented.
      await this.close(sessionId);
      return undefined;
    }
    return { identity, csrfToken: fields.csrf_token, expiresAtMs };
  }

  /** Ends a session (sign-out); idempotent. Its place in its key's index is given back too. */
  async close(sessionId: string): Promise<void> {
    const key = this.recordKey(sessionId);
    const keyHash = await this.redis.hget(key, 'key_hash');
    await this.redis.del(key);
    if (keyHash) await this.redis.zrem(this.indexKey(keyHash), this.recordName(sessionId));
  }

  /** The key's record as the API's own lookup reads it: absent once revoked. */
  private async identityOfKeyHash(keyHash: string): Promise<ApiKeyIdentity | undefined> {
    const fields = await this.redis.hgetall(this.keys.apiKey(keyHash));
    if (!fields.key_id) return undefined;
    const parsed = apiKeyIdentitySchema.safeParse({
      key_id: fields.key_id,
      tenant: fields.tenant,
      principal: fields.principal,
      scopes: (fields.scopes ?? '').split(' ').filter(Boolean),
    });
    return parsed.success ? parsed.data : undefined;
  }
}

/**
 * True when a presented CSRF token is the session's, compared in constant time.
 *
 * A synchronizer token, kept in the session's record: it is bound to the session server-side and
 * ends with it. `@fastify/csrf-protection` was weighed and not taken: beside our Redis sessions it
 * keeps its secret in a second cookie (double submit), which is bound to the session only through
 * an HMAC key every API replica must share (a new secret to configure and rotate), and which a
 * sign-out leaves standing; its alternative, `@fastify/session`, would replace these sessions and
 * their per-key bound and revocation.
 */
export function csrfTokenMatches(session: UiSession, presented: string | undefined): boolean {
  if (!presented) return false;
  const expected = Buffer.from(session.csrfToken);
  const given = Buffer.from(presented);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
