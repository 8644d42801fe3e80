import { z } from 'zod';
import { newId, recordIdSchema } from './ids.js';
import { approvalCardSchema, WEBHOOK_EVENT_TYPES, webhookEventTypeSchema } from './run-steps.js';
import { runStatusSchema, tenantIdSchema } from './runs.js';

/**
 * Webhooks ("being told"): a tenant registers a URL and is told, by a signed POST, when
 * one of its runs asks for an approval or ends. The secret signs each delivery per the Standard
 * Webhooks specification (`webhook-signature: v1,<base64 HMAC-SHA256(secret, "<id>.<t>.<body>")>`,
 * and for one release the older `Leasehold-Signature`); it is shown once, in the answer that
 * creates the webhook, and never listed.
 */

/** At most this many webhooks a tenant: each event fans out to every one of them. */
export const WEBHOOKS_PER_TENANT_MAX = 20;
/** A given secret's least length; a generated one is 32 random bytes, base64url (43 characters). */
export const WEBHOOK_SECRET_MIN_CHARS = 32;
export const WEBHOOK_URL_MAX_CHARS = 2_048;

/** A webhook's id: `whk_` and 20 characters of Crockford's base32, like every record id. */
export function newWebhookId(): string {
  // The id kinds are a closed list in ids.ts; the random part is the same generator's.
  return `whk_${newId('key').slice('key_'.length)}`;
}

const count = z.number().int().nonnegative();

/** `POST /v1/webhooks`: where to POST, which events (all of them when left out), a secret or none. */
export const createWebhookRequestSchema = z.strictObject({
  url: z.string().max(WEBHOOK_URL_MAX_CHARS),
  events: z.array(webhookEventTypeSchema).min(1).max(WEBHOOK_EVENT_TYPES.length).optional(),
  /** Left out, the server makes one. Given, at least {@link WEBHOOK_SECRET_MIN_CHARS} characters. */
  secret: z.string().min(WEBHOOK_SECRET_MIN_CHARS).max(256).optional(),
});
export type CreateWebhookRequest = z.output<typeof createWebhookRequestSchema>;

/** A webhook as listed: never its secret. */
export const webhookViewSchema = z.object({
  id: recordIdSchema,
  tenant: tenantIdSchema,
  url: z.string(),
  events: z.array(webhookEventTypeSchema),
  created_at_ms: count,
});
export type WebhookView = z.output<typeof webhookViewSchema>;

/** The answer to a creation: the only time the secret is shown. */
export const createdWebhookSchema = webhookViewSchema.extend({ secret: z.string() });
export type CreatedWebhook = z.output<typeof createdWebhookSchema>;

/** A stored webhook, secret included: the store's and the delivery worker's view alone. */
export const webhookRecordSchema = createdWebhookSchema;
export type WebhookRecord = z.output<typeof webhookRecordSchema>;

/**
 * The JSON body of a delivery. `id` names the event (one delivery per webhook and event, however
 * often it was told); `link` is the run page, relative to the API's address.
 */
export const webhookEventSchema = z.object({
  id: z.string().regex(/^[A-Za-z0-9_-]{1,160}$/),
  type: webhookEventTypeSchema,
  tenant: tenantIdSchema,
  run_id: recordIdSchema,
  status: runStatusSchema,
  error_code: z.string().nullable(),
  approval_id: recordIdSchema.nullable(),
  card: approvalCardSchema.nullable(),
  at_ms: count,
  link: z.string(),
});
export type WebhookEvent = z.output<typeof webhookEventSchema>;

/** One delivery attempt, as logged (newest first, capped and expiring). */
export const webhookDeliverySchema = z.object({
  delivery_id: z.string(),
  event_id: z.string(),
  event: webhookEventTypeSchema,
  attempt: z.number().int().positive(),
  ok: z.boolean(),
  /** The receiver's HTTP status; null when it never answered. */
  status_code: z.number().int().nullable(),
  /**
   * Why the attempt failed, in one word: `unreachable`, `refused` (the address guard), `timeout`,
   * `bad_status` (the receiver answered outside 2xx); null when it succeeded.
   */
  error: z.string().nullable(),
  duration_ms: count,
  at_ms: count,
});
export type WebhookDelivery = z.output<typeof webhookDeliverySchema>;

export const webhookDeliveryPageSchema = z.object({ deliveries: z.array(webhookDeliverySchema) });
