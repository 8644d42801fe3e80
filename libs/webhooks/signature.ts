import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The headers of one delivery attempt per the Standard Webhooks specification, which has
 * verifiers in every language: `webhook-id` (the delivery's id, the same on every retry, so a
 * receiver can drop a repeat), `webhook-timestamp` (unix seconds of this attempt) and
 * `webhook-signature: v1,<base64 HMAC-SHA256 of "<id>.<timestamp>.<body>">`.
 *
 * The HMAC key is the webhook secret's UTF-8 bytes, as for the older `Leasehold-Signature`: a
 * Standard Webhooks library takes it as `whsec_` and those bytes in base64
 * ({@link standardWebhookKey}). Signed here with node:crypto rather than the `standardwebhooks`
 * package, whose HMAC is pure JavaScript; the tests verify these headers with that package.
 */
export function standardWebhookHeaders(
  secret: string,
  messageId: string,
  body: string,
  unixSeconds: number,
): { 'webhook-id': string; 'webhook-timestamp': string; 'webhook-signature': string } {
  const digest = createHmac('sha256', secret).update(`${messageId}.${unixSeconds}.${body}`).digest('base64');
  return {
    'webhook-id': messageId,
    'webhook-timestamp': String(unixSeconds),
    'webhook-signature': `v1,${digest}`,
  };
}

/** The secret as Standard Webhooks libraries take it: `whsec_` and the secret's UTF-8 bytes in base64. */
export function standardWebhookKey(secret: string): string {
  return `whsec_${Buffer.from(secret, 'utf8').toString('base64')}`;
}

/**
 * The older `Leasehold-Signature` header of a delivery: `t=<unix seconds>,v1=<hex>`, where the hex
 * is HMAC-SHA256 under the webhook's secret of `"<t>.<body>"`. Sent beside the Standard Webhooks
 * headers for one release (0.1.x) so receivers written against it keep working; the next drops it.
 */
export function signWebhook(secret: string, body: string, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${webhookDigest(secret, body, unixSeconds)}`;
}

function webhookDigest(secret: string, body: string, unixSeconds: number): string {
  return createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
}

/**
 * What a receiver of the older header does with it: true when it carries a `v1` that is the
 * body's under `secret` and a `t` no more than `toleranceS` from `nowS`. Compared in constant time.
 */
export function verifyWebhookSignature(
  secret: string,
  body: string,
  header: string,
  options: { nowS?: number; toleranceS?: number } = {},
): boolean {
  const parts = new Map(
    header.split(',').map((part) => {
      const equals = part.indexOf('=');
      return [part.slice(0, equals).trim(), part.slice(equals + 1).trim()] as const;
    }),
  );
  const t = Number(parts.get('t'));
  const given = parts.get('v1') ?? '';
  if (!Number.isInteger(t) || !/^[0-9a-f]{64}$/.test(given)) return false;
  const nowS = options.nowS ?? Math.floor(Date.now() / 1000);
  if (Math.abs(nowS - t) > (options.toleranceS ?? 300)) return false;
  return timingSafeEqual(Buffer.from(given, 'hex'), Buffer.from(webhookDigest(secret, body, t), 'hex'));
}
