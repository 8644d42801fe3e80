import type { RedisClient } from './redis-client.js';
import { type ScriptCommands, withScripts } from './scripts.js';
import { slotBatch } from './slot-batch.js';

/** The bounds of MCP sessions across every API replica, as compiled at start-up. */
export interface McpSessionSlotLimits {
  /** Open sessions one tenant may hold, all its keys together (MCP_SESSIONS_PER_TENANT). */
  perTenant: number;
  /** Open sessions one API key may hold (MCP_SESSIONS_PER_KEY). */
  perKey: number;
  /**
   * How long a place lasts unless its session renews it: what a replica that dies without ending
   * its sessions leaves behind, at most. The table renews every third of it.
   */
  ttlMs: number;
}

/** One session's place: which session, and whose. */
export interface McpSessionSlot {
  sessionId: string;
  tenant: string;
  keyId: string;
}

/** A place taken, or the bound that refused it and when its soonest place lapses at the latest. */
export type McpSlotVerdict =
  | { taken: true }
  | { taken: false; bound: 'tenant' | 'key'; retryAfterMs: number };

/**
 * The two sorted sets of a tenant's MCP session places: the tenant's and one key's, session ids
 * scored by expiry. Both carry the tenant's hash tag (one Redis Cluster slot for the script).
 */
export function mcpSessionSlotKeys(
  prefix: string,
  tenant: string,
  keyId: string,
): { tenant: string; key: string } {
  return {
    tenant: `${prefix}{mcp:${tenant}}:sessions`,
    key: `${prefix}{mcp:${tenant}}:key:${keyId}:sessions`,
  };
}

/**
 * The places of open MCP sessions, counted in Redis so every API replica sees one count per tenant
 * and per key. A place is an expiring entry renewed while its session lives: a session that ends
 * gives its place back at once, and one whose replica died lapses within `ttlMs`.
 */
export class McpSessionSlots {
  readonly #redis: RedisClient & ScriptCommands;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    readonly limits: Readonly<McpSessionSlotLimits>,
    private readonly now: () => number = Date.now,
  ) {
    this.#redis = withScripts(redis);
  }

  /** Takes a place for `slot`, or answers the bound that refused it (nothing is taken then). */
  async take(slot: McpSessionSlot): Promise<McpSlotVerdict> {
    const keys = mcpSessionSlotKeys(this.prefix, slot.tenant, slot.keyId);
    const nowMs = this.now();
    const [outcome, soonestMs] = await this.#redis.takeSessionSlot(
      keys.tenant,
      keys.key,
      slot.sessionId,
      nowMs,
      nowMs + this.limits.ttlMs,
      this.limits.perTenant,
      this.limits.perKey,
      this.limits.ttlMs,
    );
    if (outcome === 'ok') return { taken: true };
    return {
      taken: false,
      bound: outcome === 'tenant' ? 'tenant' : 'key',
      retryAfterMs: Math.max(1_000, Number(soonestMs) - nowMs),
    };
  }

  /** Renews the places of sessions still open (the table's timer), one batch for all of them. */
  async renew(slots: readonly McpSessionSlot[]): Promise<void> {
    if (slots.length === 0) return;
    const expiresAtMs = this.now() + this.limits.ttlMs;
    const batch = slotBatch(this.#redis);
    for (const slot of slots) {
      const keys = mcpSessionSlotKeys(this.prefix, slot.tenant, slot.keyId);
      // XX: a place already given back (the session ended meanwhile) is not taken again.
      batch.zadd(keys.tenant, 'XX', expiresAtMs, slot.sessionId).pexpire(keys.tenant, this.limits.ttlMs);
      batch.zadd(keys.key, 'XX', expiresAtMs, slot.sessionId).pexpire(keys.key, this.limits.ttlMs);
    }
    await batch.exec();
  }

  /** Gives a place back (the session ended, or never opened); idempotent. */
  async release(slot: McpSessionSlot): Promise<void> {
    const keys = mcpSessionSlotKeys(this.prefix, slot.tenant, slot.keyId);
    await this.#redis.multi().zrem(keys.tenant, slot.sessionId).zrem(keys.key, slot.sessionId).exec();
  }
}
