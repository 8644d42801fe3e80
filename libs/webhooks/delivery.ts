import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { type Job, type Processor, UnrecoverableError } from 'bullmq';
import { type WebhookJob, type WebhookJobResult, webhookJobSchema } from '../../queues/webhooks.js';
import type { WebhookRecord } from '../contracts/index.js';
import { AddressRefused, canonicalHost, checkedLookup, type EgressGuard, portOf } from '../egress/index.js';
import type { WebhookStore } from '../store/webhooks.js';
import { webhookGuard } from './address-guard.js';
import { signWebhook, standardWebhookHeaders } from './signature.js';

export interface WebhookDeliveryDeps {
  hooks: Pick<WebhookStore, 'get' | 'logDelivery'>;
  /** `LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE`: deliver to loopback and private addresses too. */
  allowPrivate: boolean;
  /** The fleet's own ports, refused even where private addresses are allowed (DESIGN §12). */
  ownPorts?: readonly number[];
  /** Where the full reason of a failed attempt goes; the tenant reads one word of it. */
  log?: { warn(fields: Record<string, unknown>, message: string): void };
  /** How long a receiver has to answer, connection included (default 10 s). */
  timeoutMs?: number;
  /** Epoch ms (tests move it). */
  clock?: () => number;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** A receiver's answer is read only this far: only its status counts. */
const ANSWER_READ_MAX_BYTES = 4_096;

/**
 * Why an attempt failed, as its tenant reads it in the delivery log: one word, never the system's
 * error (`ECONNREFUSED`, `EHOSTUNREACH`, `ENOTFOUND` would map which hosts and ports of the fleet's
 * network answer). The full reason goes to the server log.
 */
export type DeliveryFailure = 'unreachable' | 'refused' | 'timeout' | 'bad_status';

/** The answer of one attempt: the receiver's status, or why there was none. */
type Attempt =
  | { statusCode: number; error: null }
  | { statusCode: null; error: Exclude<DeliveryFailure, 'bad_status'>; cause: string };

/**
 * The webhooks queue's processor: POSTs the event, signed, to the webhook as it is
 * stored now; logs every attempt; a 2xx is done, anything else throws so BullMQ retries it with
 * backoff. A webhook deleted since is told nothing; a URL now on a refused address is not retried.
 */
export function webhookDeliveryProcessor(
  deps: WebhookDeliveryDeps,
): Processor<WebhookJob, WebhookJobResult, string> {
  const clock = deps.clock ?? Date.now;
  const guard = webhookGuard(deps.allowPrivate, deps.ownPorts);
  return async (job: Job<WebhookJob, WebhookJobResult, string>) => {
    const { tenant, webhookId, event } = webhookJobSchema.parse(job.data);
    const hook = await deps.hooks.get(tenant, webhookId);
    if (!hook) return { status_code: null, skipped: 'webhook_deleted' };
    const body = JSON.stringify(event);
    const startedMs = clock();
    const deliveryId = job.id ?? '';
    const startedS = Math.floor(startedMs / 1000);
    const attempt = await post(
      hook,
      body,
      {
        // The job's id is the same on every retry: the receiver's key to drop a repeat.
        ...standardWebhookHeaders(hook.secret, deliveryId, body, startedS),
        'leasehold-event': event.type,
        'leasehold-delivery': deliveryId,
        'leasehold-signature': signWebhook(hook.secret, body, startedS),
      },
      guard,
      deps.timeoutMs ?? DEFAULT_TIMEOUT_MS,
    );
    const ok = attempt.statusCode !== null && attempt.statusCode >= 200 && attempt.statusCode < 300;
    await deps.hooks.logDelivery(tenant, webhookId, {
      delivery_id: deliveryId,
      event_id: event.id,
      event: event.type,
      attempt: job.attemptsMade + 1,
      ok,
      status_code: attempt.statusCode,
      error: ok ? null : (attempt.error ?? 'bad_status'),
      duration_ms: Math.max(0, clock() - startedMs),
      at_ms: startedMs,
    });
    if (ok) return { status_code: attempt.statusCode };
    const why =
      attempt.statusCode === null
        ? `${attempt.error}: ${attempt.cause}`
        : `the receiver answered ${attempt.statusCode}`;
    deps.log?.warn(
      { tenant, webhook_id: webhookId, attempt: job.attemptsMade + 1, why },
      'webhook delivery failed',
    );
    if (attempt.statusCode === null && attempt.error === 'refused') throw new UnrecoverableError(why);
    throw new Error(`webhook ${webhookId}: ${why}`);
  };
}

/** One POST under one deadline; never throws. The address is checked on the way (after DNS). */
function post(
  hook: WebhookRecord,
  body: string,
  headers: Record<string, string>,
  guard: EgressGuard,
  timeoutMs: number,
): Promise<Attempt> {
  const url = new URL(hook.url);
  const port = portOf(url);
  // A literal address is connected to without a lookup, so it is judged here; a name is judged
  // by the lookup, on the addresses the socket then connects to.
  const literal = canonicalHost(url.hostname);
  if (literal === undefined || (isIP(literal) && !guard.judge(literal, port).allowed))
    return Promise.resolve({ statusCode: null, error: 'refused', cause: `${url.host} is refused` });
  const send = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<Attempt>((resolve) => {
    let timer: NodeJS.Timeout | undefined;
    const done = (attempt: Attempt) => {
      clearTimeout(timer);
      resolve(attempt);
    };
    const request = send(
      url,
      {
        method: 'POST',
        headers: {
          ...headers,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'user-agent': 'Leasehold-Webhooks/1',
        },
        lookup: checkedLookup(guard, port),
      },
      (response) => {
        let read = 0;
        response.on('data', (chunk: Buffer) => {
          read += chunk.length;
          if (read > ANSWER_READ_MAX_BYTES) response.destroy();
        });
        response.on('close', () => done({ statusCode: response.statusCode ?? 0, error: null }));
        response.on('error', () => {});
      },
    );
    // One deadline for the whole attempt (connection, answer), not an idle timeout.
    let timedOut = false;
    timer = setTimeout(() => {
      timedOut = true;
      request.destroy(new Error(`no answer within ${timeoutMs} ms`));
    }, timeoutMs);
    request.on('error', (error) => {
      const word = error instanceof AddressRefused ? 'refused' : timedOut ? 'timeout' : 'unreachable';
      done({ statusCode: null, error: word, cause: error.message });
    });
    request.end(body);
  });
}
