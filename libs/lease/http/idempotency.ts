import { createHash } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { canonicalJson } from '../../contracts/canonical-json.js';
import type { ProfileRef } from '../../contracts/index.js';
import { errorBody } from '../../telemetry/index.js';
import {
  DataPlaneError,
  type IdempotencyClaim,
  type IdempotencyTicket,
  type LeaseStore,
  type UnclaimedKey,
  unclaimedKeyError,
} from '../index.js';

/** How long a request with an Idempotency-Key waits for the first one with the same key to answer. */
const PENDING_WAIT_MS = 10_000;
/** How often a waiting request looks again for the first one's answer. */
const PENDING_POLL_MS = 50;

/** A route's answer before it is stored: its HTTP status and its JSON body. */
export interface IdempotentAnswer {
  status: number;
  body: unknown;
}

/** An answer that claims its key itself: its claim's answer when the key was not its to claim. */
export type SelfClaimedAnswer = IdempotentAnswer | UnclaimedKey;

/**
 * What an Idempotency-Key is bound to: the method, the path and the body's canonical JSON. The batch renewals hash each item as the single renew route hashes that renewal sent alone
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
 *
 * The key is claimed here before `answer` runs, unless `claimsItself` is passed: then `answer`
 * gets the ticket and claims it in its own first store call (acquire and renew claim it
 * in their scripts, one round trip fewer), answering the claim instead when the key was not its to
 * claim.
 */
export async function answerIdempotently(
  store: LeaseStore,
  profile: ProfileRef,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: () => Promise<IdempotentAnswer>,
): Promise<FastifyReply>;
export async function answerIdempotently(
  store: LeaseStore,
  profile: ProfileRef,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: (ticket: IdempotencyTicket) => Promise<SelfClaimedAnswer>,
  options: { claimsItself: true },
): Promise<FastifyReply>;
export async function answerIdempotently(
  store: LeaseStore,
  profile: ProfileRef,
  request: FastifyRequest,
  reply: FastifyReply,
  answer: (ticket: IdempotencyTicket) => Promise<SelfClaimedAnswer>,
  options: { claimsItself?: boolean } = {},
): Promise<FastifyReply> {
  const key = request.headers['idempotency-key'];
  if (typeof key !== 'string' || !/^[A-Za-z0-9_.:-]{1,128}$/.test(key))
    throw new DataPlaneError(
      'validation_failed',
      'Idempotency-Key: a header of 1 to 128 letters, digits, _ . : or -',
      { field: 'Idempotency-Key' },
    );
  const requestHash = idempotentRequestHash(request.method, request.url.split('?')[0] ?? '', request.body);
  const ticket: IdempotencyTicket = { key, requestHash };

  const deadline = Date.now() + PENDING_WAIT_MS;
  for (;;) {
    let outcome: { claim: IdempotencyClaim; answered?: Settled };
    if (options.claimsItself) {
      const answered = await settle(store, profile, key, () => answer(ticket));
      outcome = 'claim' in answered ? { claim: answered.claim } : { claim: { status: 'claimed' }, answered };
    } else outcome = { claim: await store.claimIdempotency(profile, key, requestHash) };
    const { claim } = outcome;
    if (claim.status === 'conflict') throw unclaimedKeyError('conflict');
    if (claim.status === 'replay')
      return reply
        .code(claim.httpStatus)
        .header('idempotent-replayed', 'true')
        .type('application/json')
        .send(claim.body);
    if (claim.status === 'claimed') {
      const { status, body } =
        outcome.answered ?? ((await settle(store, profile, key, () => answer(ticket))) as Settled);
      // Serialized through the route's answer schema for this status (plain JSON for a
      // refusal), once: a replay sends the stored text as it is.
      // Both serializers (the schema's and JSON.stringify) answer text.
      const text = reply.code(status).serialize(body) as string;
      storeAnswer(store, profile, key, status, text, reply);
      return reply.type('application/json').send(text);
    }
    if (Date.now() > deadline) throw unclaimedKeyError('pending');
    await new Promise((resolve) => setTimeout(resolve, PENDING_POLL_MS));
  }
}

/**
 * Stores the answer under its key, and lets the answer go without waiting for Redis to acknowledge
 * it (a reattach waited one round trip more for nothing). The write is sent now, on the
 * store's connection, ahead of anything a later request sends: a retry with the key claims after it
 * and replays it; one that reaches another connection first finds the record pending and waits for
 * it. A write that fails leaves the record pending, as a failed store left it when the answer waited.
 */
function storeAnswer(
  store: LeaseStore,
  profile: ProfileRef,
  key: string,
  status: number,
  text: string,
  reply: FastifyReply,
): void {
  store
    .completeIdempotency(profile, key, status, text)
    .catch((error: unknown) =>
      reply.log.error({ err: error, idempotency_key: key }, 'the answer could not be stored under its key'),
    );
}

/** An answer under a claimed key: what the route answered, or the refusal it threw (4xx). */
type Settled = IdempotentAnswer;

/**
 * Runs `answer` under a claimed key: a refusal (4xx) becomes the answer to store; a 5xx or an
 * unexpected failure releases the key and is thrown, so a retry really retries. An answer that
 * claims its key itself and did not claim it is passed back as it is.
 */
async function settle(
  store: LeaseStore,
  profile: ProfileRef,
  key: string,
  answer: () => Promise<SelfClaimedAnswer>,
): Promise<SelfClaimedAnswer> {
  try {
    return await answer();
  } catch (error) {
    const refusal = error instanceof DataPlaneError && error.status < 500;
    if (!refusal) {
      await store.releaseIdempotency(profile, key);
      throw error;
    }
    return { status: error.status, body: errorBody(error.code, error.message, error.details) };
  }
}
