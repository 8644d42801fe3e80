import { createHash } from 'node:crypto';

/**
 * Idempotency keys for the data plane's acquire, renew and close (DESIGN §5: the same key with the
 * same body replays the stored answer). Each is derived from what makes the request what it is, so a
 * request sent again — by a retry, or by a worker resuming the same durable invocation — is the same
 * request byte for byte and replays instead of acting twice. Keys fit `[A-Za-z0-9_.:-]{1,128}`.
 */

function digest(value: string): string {
  return createHash('sha256').update(value).digest('hex').slice(0, 48);
}

/** ADR-0177: one acquisition identity per durable tool invocation. */
export function acquireIdempotencyKey(invocationId: string): string {
  if (invocationId.length === 0) throw new TypeError('an invocation id is required to acquire a lease');
  return `acquire.${digest(invocationId)}`;
}

/** One renewal per lease and requested horizon. */
export function renewIdempotencyKey(leaseId: string, requestedExpiresAtMs: number): string {
  return `renew.${digest(`${leaseId}\n${requestedExpiresAtMs}`)}`;
}

/** One close per lease and seal choice. */
export function closeIdempotencyKey(leaseId: string, seal: boolean): string {
  return `close.${digest(`${leaseId}\n${seal ? 'seal' : 'discard'}`)}`;
}

/**
 * ADR-0127 d7: the one acquire an invocation sends after sealing another run's lease. The first
 * acquire's key already holds the stored conflict, so the replacement needs its own, derived from the
 * invocation and the lease it replaced: a resumed worker repeating the step replays it.
 */
export function replacingAcquireIdempotencyKey(invocationId: string, replacedLeaseId: string): string {
  if (invocationId.length === 0) throw new TypeError('an invocation id is required to acquire a lease');
  return `acquire.${digest(`${invocationId}\nreplacing ${replacedLeaseId}`)}`;
}
