import { randomBytes, timingSafeEqual } from 'node:crypto';
import { type ApiKeyIdentity, apiKeyIdentitySchema } from '../contracts/index.js';
import { sha256Hex } from './canonical-json.js';
import type { RedisClient } from './redis-client.js';
import { RunKeys } from './run-keys.js';

/** How long a person stays signed in to the run pages: a working day, then the key again. */
export const UI_SESSION_TTL_MS = 12 * 3600_000;

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
 * The run pages' sign-in sessions (issue 13): a person presents an API key once, and the browser
 * holds a random session id in an HttpOnly cookie instead of the key. The record is named by the
 * id's SHA-256, so a leaked store yields no cookie that works, and holds the key's hash, so each
 * request reads the key's record afresh: a revoked key ends every session it opened, and a key's
 * scopes are the session's scopes at every request. Redis expires the record with the session.
 */
export class UiSessions {
  private readonly keys: RunKeys;

  constructor(
    private readonly redis: RedisClient,
    private readonly keyPrefix: string,
    private readonly ttlMs = UI_SESSION_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {
    this.keys = new RunKeys(keyPrefix);
  }

  private recordKey(sessionId: string): string {
    return `${this.keyPrefix}ui-session:${sha256Hex(sessionId)}`;
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
    return { sessionId, session: { identity, csrfToken, expiresAtMs } };
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

  /** Ends a session (sign-out); idempotent. */
  async close(sessionId: string): Promise<void> {
    await this.redis.del(this.recordKey(sessionId));
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

/** True when a presented CSRF token is the session's, compared in constant time. */
export function csrfTokenMatches(session: UiSession, presented: string | undefined): boolean {
  if (!presented) return false;
  const expected = Buffer.from(session.csrfToken);
  const given = Buffer.from(presented);
  return expected.length === given.length && timingSafeEqual(expected, given);
}
