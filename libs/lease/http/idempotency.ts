import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ProfileRef } from '../../contracts/index.js';
import { canonicalJson } from '../../store/index.js';
import { errorBody } from '../../telemetry/index.js';
import { DataPlaneError, type LeaseStore } from '../index.js';

/** How long a request with an Idempotency-Key waits for the first one with the same key to answer. */
const PENDING_WAIT_MS = 10_000;
/** How often a waiting request looks again for the first one's answer. */
const PENDING_POLL_MS = 50;

/** A route's answer before it is stored: its HTTP status and its JSON body. */
export interface IdempotentAnswer {
  status: number;
  body: unknown;
}

/**
 * What an Idempotency-Key is bound to: the method, the path and the body's canonical JSON. Issue 18:
 * the batch renewals hash each item as the single renew route hashes that renewal sent alone
 * (`POST …/leases/{id}/renew` and its body), so the two share one record per key.
 */
export function idempotentRequestHash(method: string, path: string, body: unknown): string {
  return createHash('sha256')
    .update(`${method} ${path}\n${canonicalJson(body)}`)
    .digest('hex');
}

/**
 * The exact idempotency rule of DESIGN §5: the same `Idempotency-Key` with the same body (method,
 * path and canonical JSON) replays the stored answer; with another body it is `idempotency_conflict`.
 * Refusals (4xx) are stored like answers; a 5xx or an unexpected failure releases the key, so a
 * retry really retries.
 */
export async function answerIdempotently(
  store: LeaseStore,
  profile: ProfileRef,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: () => Promise<IdempotentAnswer>,
): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(key))
    throw new DataPlaneError(
      'validation_failed',
      'Idempotency-Key: a header of 1 to 128 letters, digits, _ . : or -',
      { field: 'Idempotency-Key' },
    );
  const requestHash = idempotentRequestHash(request.method, request.url.split('?')[0] ?? '', request.body);

  const deadline = Date.now() + PENDING_WAIT_MS;
  for (;;) {
    const claim = await store.claimIdempotency(profile, key, requestHash);
    if (claim.status === 'conflict')
      throw new DataPlaneError('idempotency_conflict', 'this Idempotency-Key was used with another request');
    if (claim.status === 'replay')
      return reply
        .code(claim.httpStatus)
        .header('idempotent-replayed', 'true')
        .type('application/json')
        .send(claim.body);
    if (claim.status === 'claimed') break;
    if (Date.now() > deadline)
      throw new DataPlaneError(
        'idempotency_in_progress',
        'the first request with this Idempotency-Key is still being answered',
      );
    await new Promise((resolve) => setTimeout(resolve, PENDING_POLL_MS));
  }

  let status: number;
  let body: unknown;
  try {
    ({ status, body } = await answer());
  } catch (error) {
    const refusal = error instanceof DataPlaneError && error.status < 500;
    if (!refusal) {
      await store.releaseIdempotency(profile, key);
      throw error;
    }
    status = error.status;
    body = errorBody(error.code, error.message, error.details);
  }
  // Issue 16: serialized through the route's answer schema for this status (plain JSON for a
  // refusal), once: a replay sends the stored text as it is.
  // Both serializers (the schema's and JSON.stringify) answer text.
  const text = reply.code(status).serialize(body) as string;
  await store.completeIdempotency(profile, key, status, text);
  return reply.type('application/json').send(text);
}
