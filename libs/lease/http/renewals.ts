import type { FastifyInstance, FastifyReply } from 'fastify';
import type { z } from 'zod';
import { leaseAnswerSchema, type RenewalItem, type renewalsAnswerSchema } from '../../contracts/index.js';
import { errorBody } from '../../telemetry/index.js';
import type { IdempotentAnswerRecord, LeaseService, LeaseStore, RenewalResult } from '../index.js';
import { idempotentRequestHash } from './idempotency.js';
import { registerOperation, serializationSchema } from './route-registration.js';
import { DATA_PLANE_OPERATIONS } from './route-table.js';

type RenewalAnswer = z.output<typeof renewalsAnswerSchema>['renewals'][number];

/** The path the single renew route serves this renewal at (the client's spelling: ids need no escaping). */
function singleRenewPath(item: RenewalItem): string {
  return `/v1/tenants/${item.tenant}/profiles/${item.profile_id}/leases/${item.lease_id}/renew`;
}

/**
 * `POST /v1/renewals`, many renewals of leases this worker serves in one request, each
 * under its own Idempotency-Key and answered as the single renew route answers it. A key is the
 * single route's: each item is hashed as that renewal sent alone (path and body), and its answer is
 * stored as that route stores it (the lease through the same serializer; a refusal as JSON), so a
 * retried batch, or a renewal sent alone after it, replays the same answer and renews nothing twice.
 * The body is parsed whole before anything is written (at most 150 items, every one well formed).
 */
export function registerRenewalsRoute(
  app: FastifyInstance,
  leases: LeaseService,
  store: LeaseStore,
  parse: <T extends z.ZodType>(schema: T, value: unknown, where: string) => z.output<T>,
): void {
  registerOperation(app, DATA_PLANE_OPERATIONS.renewLeases, async (request, reply) => {
    const { renewals } = parse(DATA_PLANE_OPERATIONS.renewLeases.body, request.body, 'body');
    const results = await leases.renewMany(
      renewals.map((item) => ({
        profile: { tenant: item.tenant, id: item.profile_id },
        leaseId: item.lease_id,
        requestedExpiresAtMs: item.requested_expires_at_ms,
        idempotencyKey: item.idempotency_key,
        requestHash: idempotentRequestHash('POST', singleRenewPath(item), {
          requested_expires_at_ms: item.requested_expires_at_ms,
        }),
      })),
    );
    const stored: IdempotentAnswerRecord[] = [];
    const answers: RenewalAnswer[] = [];
    for (const [index, result] of results.entries()) {
      const item = renewals[index] as RenewalItem;
      const profile = { tenant: item.tenant, id: item.profile_id };
      const answer = await answerOf(result, reply, async () =>
        store.releaseIdempotency(profile, item.idempotency_key),
      );
      if (answer.store)
        stored.push({ profile, key: item.idempotency_key, httpStatus: answer.status, body: answer.text });
      answers.push(renewalAnswer(item, answer.status, answer.text, result.kind === 'replay'));
    }
    await store.completeIdempotencies(stored);
    return { renewals: answers };
  });
}

/**
 * One renewal's answer as the single renew route gives it: its status and the text it stores (and
 * whether it is this request's to store). An unexpected failure releases the key, as that route does.
 */
async function answerOf(
  result: RenewalResult,
  reply: FastifyReply,
  release: () => Promise<void>,
): Promise<{ status: number; text: string; store: boolean }> {
  switch (result.kind) {
    case 'replay':
      return { status: result.httpStatus, text: result.body, store: false };
    case 'renewed':
      return {
        status: 200,
        // The single renew route's serializer for its 200 (the same schema, compiled the same way).
        text: reply.serializeInput({ ...result.lease }, serializationSchema(leaseAnswerSchema)),
        store: true,
      };
    case 'refused':
      return {
        status: result.error.status,
        text: JSON.stringify(errorBody(result.error.code, result.error.message, result.error.details)),
        store: result.claimed,
      };
    case 'failed':
      await release();
      reply.log.error({ err: result.error }, 'a renewal of a batch failed');
      return { status: 500, text: JSON.stringify(errorBody('internal', 'internal error')), store: false };
  }
}

function renewalAnswer(item: RenewalItem, status: number, text: string, replayed: boolean): RenewalAnswer {
  const body = JSON.parse(text) as { error?: RenewalAnswer['error'] };
  const ok = status >= 200 && status < 300;
  return {
    lease_id: item.lease_id,
    idempotency_key: item.idempotency_key,
    status,
    replayed,
    lease: ok ? (body as RenewalAnswer['lease']) : null,
    error: ok ? null : (body.error ?? { code: 'internal', message: 'internal error' }),
  };
}
