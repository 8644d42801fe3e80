import { randomBytes } from 'node:crypto';
import {
  newWebhookId,
  recordIdSchema,
  tenantIdSchema,
  WEBHOOK_EVENT_TYPES,
  WEBHOOKS_PER_TENANT_MAX,
  type WebhookDelivery,
  type WebhookRecord,
  type WebhookView,
  webhookDeliverySchema,
  webhookRecordSchema,
  webhookViewSchema,
} from '../contracts/index.js';
import type { RedisClient } from './redis-client.js';
import { withScripts } from './scripts.js';

/** Attempts kept in a webhook's delivery log (the newest). */
export const WEBHOOK_DELIVERIES_KEPT = 100;
/** A delivery log expires this long after its last attempt (7 days). */
export const WEBHOOK_DELIVERY_LOG_TTL_MS = 7 * 24 * 3600_000;

interface WebhookScripts {
  addWebhook(webhooksKey: string, webhookId: string, record: string, max: number): Promise<number>;
}

export interface NewWebhook {
  tenant: string;
  url: string;
  events?: readonly string[] | undefined;
  /** Left out, 32 random bytes (base64url) are made. */
  secret?: string | undefined;
}

/**
 * A tenant's webhooks: one hash per tenant, `{ten:T}:webhooks` (id → record JSON, the
 * secret included), and beside it, in the same slot, each webhook's delivery log: a list of the
 * newest {@link WEBHOOK_DELIVERIES_KEPT} attempts that expires a week after the last one. The
 * secret is kept as given: it must sign each delivery, so it cannot be stored as a hash; it is
 * answered once at creation and never in a listing.
 */
export class WebhookStore {
  readonly #redis: RedisClient & WebhookScripts;

  constructor(
    redis: RedisClient,
    private readonly prefix: string,
    private readonly now: () => number = Date.now,
  ) {
    this.#redis = withScripts(redis) as unknown as RedisClient & WebhookScripts;
  }

  #hooksKey(tenant: string): string {
    return `${this.prefix}{ten:${tenant}}:webhooks`;
  }
  #deliveriesKey(tenant: string, webhookId: string): string {
    return `${this.prefix}{ten:${tenant}}:webhook:${webhookId}:deliveries`;
  }

  /** Registers a webhook; undefined when the tenant holds {@link WEBHOOKS_PER_TENANT_MAX} already. */
  async create(input: NewWebhook): Promise<WebhookRecord | undefined> {
    const record = webhookRecordSchema.parse({
      id: newWebhookId(),
      tenant: tenantIdSchema.parse(input.tenant),
      url: input.url,
      events: [...new Set(input.events ?? WEBHOOK_EVENT_TYPES)].sort(),
      created_at_ms: this.now(),
      secret: input.secret ?? randomBytes(32).toString('base64url'),
    });
    const added = await this.#redis.addWebhook(
      this.#hooksKey(record.tenant),
      record.id,
      JSON.stringify(record),
      WEBHOOKS_PER_TENANT_MAX,
    );
    return added === 1 ? record : undefined;
  }

  /** The tenant's webhook with its secret (for delivery), or undefined: another tenant's is never found. */
  async get(tenant: string, webhookId: string): Promise<WebhookRecord | undefined> {
    if (!validIds(tenant, webhookId)) return undefined;
    const raw = await this.#redis.hget(this.#hooksKey(tenant), webhookId);
    return raw ? webhookRecordSchema.parse(JSON.parse(raw)) : undefined;
  }

  /** The tenant's webhooks with their secrets, oldest first (for telling an event). */
  async records(tenant: string): Promise<WebhookRecord[]> {
    if (!tenantIdSchema.safeParse(tenant).success) return [];
    const all = Object.values(await this.#redis.hgetall(this.#hooksKey(tenant)));
    return all
      .map((raw) => webhookRecordSchema.parse(JSON.parse(raw)))
      .sort((a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id));
  }

  /** The tenant's webhooks as listed: never a secret. */
  async list(tenant: string): Promise<WebhookView[]> {
    return (await this.records(tenant)).map((record) => webhookViewSchema.parse(record));
  }

  /** Deletes the tenant's webhook and its log; false for an id this tenant does not hold. */
  async delete(tenant: string, webhookId: string): Promise<boolean> {
    if (!validIds(tenant, webhookId)) return false;
    const replies = await this.#redis
      .multi()
      .hdel(this.#hooksKey(tenant), webhookId)
      .del(this.#deliveriesKey(tenant, webhookId))
      .exec();
    return Number(replies?.[0]?.[1] ?? 0) === 1;
  }

  /** Logs one attempt: newest first, capped, the log's expiry pushed on. */
  async logDelivery(tenant: string, webhookId: string, delivery: WebhookDelivery): Promise<void> {
    const key = this.#deliveriesKey(tenant, webhookId);
    await this.#redis
      .multi()
      .lpush(key, JSON.stringify(webhookDeliverySchema.parse(delivery)))
      .ltrim(key, 0, WEBHOOK_DELIVERIES_KEPT - 1)
      .pexpire(key, WEBHOOK_DELIVERY_LOG_TTL_MS)
      .exec();
  }

  /** The logged attempts, newest first; empty for a webhook this tenant does not hold. */
  async deliveries(
    tenant: string,
    webhookId: string,
    limit = WEBHOOK_DELIVERIES_KEPT,
  ): Promise<WebhookDelivery[]> {
    if (!validIds(tenant, webhookId)) return [];
    const raws = await this.#redis.lrange(this.#deliveriesKey(tenant, webhookId), 0, limit - 1);
    return raws.map((raw) => webhookDeliverySchema.parse(JSON.parse(raw)));
  }
}

function validIds(tenant: string, webhookId: string): boolean {
  return tenantIdSchema.safeParse(tenant).success && recordIdSchema.safeParse(webhookId).success;
}
