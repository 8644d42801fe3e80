import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The `Leasehold-Signature` header of a delivery: `t=<unix seconds>,v1=<hex>`, where
 * the hex is HMAC-SHA256 under the webhook's secret of `"<t>.<body>"`. The time is signed with
 * the body, so a receiver that refuses an old `t` refuses a replayed delivery too (as Stripe's).
 */
export function signWebhook(secret: string, body: string, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${webhookDigest(secret, body, unixSeconds)}`;
}

function webhookDigest(secret: string, body: string, unixSeconds: number): string {
  return createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex');
}

/**
 * What a receiver does with the header: true when it carries a `v1` that is the body's under
 * `secret` and a `t` no more than `toleranceS` from `nowS`. Compared in constant time.
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
