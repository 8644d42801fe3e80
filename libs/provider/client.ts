import type { z } from 'zod';
import type {
  AcquireAnswer,
  AcquireLease,
  createProfileSchema,
  HandoverAnswer,
  LeaseView,
  LiveEvent,
  PageArtifacts,
  PersonControlAnswer,
  PersonControlEndAnswer,
  PersonInputEvent,
  ProfileRef,
  ProfileView,
} from '../contracts/index.js';
import {
  personControlAnswerSchema,
  personControlEndAnswerSchema,
  personInputAnswerSchema,
} from '../contracts/index.js';
import {
  acquireAnswerSchema,
  handoverAnswerSchema,
  leaseViewSchema,
  type PageCallResult,
  pageAnswerSchema,
  previewAnswerSchema,
  profileListSchema,
  profileViewSchema,
  renewalsAnswerSchema,
} from './answers.js';
import {
  type DataPlaneOperation,
  errorFromAnswer,
  errorFromTransport,
  failedBeforeConnecting,
  ProviderError,
} from './errors.js';
import { closeIdempotencyKey, renewIdempotencyKey } from './idempotency-keys.js';
import { readLiveEvents } from './live-stream.js';

/** How long a lease call (acquire, renew, close, reads) may take when its caller gives no deadline. */
export const DEFAULT_LEASE_CALL_TIMEOUT_MS = 15_000;
/** How long a page call may take when its caller gives no deadline (the data plane's own default). */
export const DEFAULT_PAGE_CALL_TIMEOUT_MS = 30_000;
/**
 * Of a page call's deadline, the part kept for the answer to travel back: the service is asked to
 * finish this much earlier than the run side stops waiting, so a call that ends on time is answered.
 */
export const ANSWER_MARGIN_MS = 500;
/** The data plane accepts page-call deadlines of 1 ms to 120 s. */
const SERVICE_DEADLINE_MAX_MS = 120_000;

/** One call's limits: an absolute deadline (epoch ms, wall clock) and the caller's AbortSignal. */
export interface CallLimits {
  deadlineMs?: number;
  signal?: AbortSignal;
}

export interface DataPlaneClientOptions {
  /** The browser worker's data-plane URL (`http://host:port`). */
  baseUrl: string;
  /** The shared data-plane token; sent as a bearer token, never logged or put in an error. */
  token: string;
  /** Tests: another fetch. */
  fetch?: typeof fetch;
}

/** One renewal of {@link DataPlaneClient.renewMany}: a lease of the worker and the expiry asked for. */
export interface RenewalRequest {
  profile: ProfileRef;
  leaseId: string;
  requestedExpiresAtMs: number;
}

/** Each renewal's result, in the order asked: the lease renewed, or the error `renew` would throw. */
export type RenewalOutcome =
  | { leaseId: string; lease: LeaseView; error?: undefined }
  | { leaseId: string; lease?: undefined; error: ProviderError };

export interface AcquireResult {
  lease: AcquireAnswer;
  /** True when the service replayed the stored answer of an earlier request with the same key. */
  replayed: boolean;
}

/** A lease on the data plane: its profile and id. */
export interface LeaseRef {
  profile: ProfileRef;
  leaseId: string;
}

interface Request {
  operation: DataPlaneOperation;
  method: 'GET' | 'POST' | 'DELETE';
  path: string;
  body?: unknown;
  idempotencyKey?: string;
  deadlineMs: number;
  signal: AbortSignal | undefined;
}

/**
 * The run side's HTTP client of one browser worker's data plane (DESIGN §5). Every call runs under
 * one deadline and the caller's signal; every failure is a {@link ProviderError} with a stable code.
 * It holds no lease state: {@link BrowserLeaseProvider} does.
 *
 * Written by hand rather than on `openapi-fetch` over `clients/typescript/data-plane.d.ts`: what a
 * failed effect means hangs on where the exchange broke (`not_connected` was never applied,
 * `connection_lost` and `timeout` may have been: ADR-0127 d3, ADR-0177), which `openapi-fetch`
 * folds into one thrown error for sending and reading alike; answers are parsed by the contracts'
 * zod schemas (the generated types check nothing at run time); and a call's Idempotency-Key, the
 * `idempotent-replayed` answer header and the live view's event stream sit outside what it types.
 * What it would add, paths checked against the document, the tests that drive this client against
 * a real browser worker give, and the document is generated from that worker's route table.
 */
export class DataPlaneClient {
  readonly baseUrl: string;
  readonly #token: string;
  readonly #fetch: typeof fetch;

  constructor(options: DataPlaneClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.#token = options.token;
    this.#fetch = options.fetch ?? fetch;
  }

  async createProfile(
    profile: z.input<typeof createProfileSchema>,
    limits: CallLimits = {},
  ): Promise<ProfileView> {
    const answer = await this.#send({
      operation: 'create_profile',
      method: 'POST',
      path: tenantProfilesPath(profile.tenant),
      body: profile,
      ...leaseLimits(limits),
    });
    return this.#parse('create_profile', profileViewSchema, answer.body);
  }

  /** One tenant's profiles (the data plane lists no other way). */
  async listProfiles(tenant: string, limits: CallLimits = {}): Promise<ProfileView[]> {
    const answer = await this.#send({
      operation: 'list_profiles',
      method: 'GET',
      path: tenantProfilesPath(tenant),
      ...leaseLimits(limits),
    });
    return this.#parse('list_profiles', profileListSchema, answer.body).profiles;
  }

  /**
   * Acquires or reattaches (ADR-0127 d1). `idempotencyKey` must be derived from the durable
   * invocation and `request` computed once for it, so a resent request replays (ADR-0177).
   */
  async acquire(
    profile: ProfileRef,
    request: AcquireLease,
    idempotencyKey: string,
    limits: CallLimits = {},
  ): Promise<AcquireResult> {
    const answer = await this.#send({
      operation: 'acquire',
      method: 'POST',
      path: `${profilePath(profile)}/leases`,
      body: request,
      idempotencyKey,
      ...leaseLimits(limits),
    });
    return { lease: this.#parse('acquire', acquireAnswerSchema, answer.body), replayed: answer.replayed };
  }

  async getLease(profile: ProfileRef, leaseId: string, limits: CallLimits = {}): Promise<LeaseView> {
    const answer = await this.#send({
      operation: 'get_lease',
      method: 'GET',
      path: leasePath(profile, leaseId),
      ...leaseLimits(limits),
    });
    return this.#parse('get_lease', leaseViewSchema, answer.body);
  }

  /**
   * What became of the effect a run's last owner sent on this lease with `sequence` and never had
   * answered; one that never reached the lease is skipped past, so it can never be applied late.
   */
  async handover(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    limits: CallLimits = {},
  ): Promise<HandoverAnswer> {
    const answer = await this.#send({
      operation: 'handover',
      method: 'POST',
      path: `${leasePath(profile, leaseId)}/handover`,
      body: { sequence },
      ...leaseLimits(limits),
    });
    return this.#parse('handover', handoverAnswerSchema, answer.body);
  }

  async renew(
    profile: ProfileRef,
    leaseId: string,
    requestedExpiresAtMs: number,
    limits: CallLimits = {},
  ): Promise<LeaseView> {
    const answer = await this.#send({
      operation: 'renew',
      method: 'POST',
      path: `${leasePath(profile, leaseId)}/renew`,
      body: { requested_expires_at_ms: requestedExpiresAtMs },
      idempotencyKey: renewIdempotencyKey(leaseId, requestedExpiresAtMs),
      ...leaseLimits(limits),
    });
    return this.#parse('renew', leaseViewSchema, answer.body);
  }

  /**
   * Many renewals of this worker's leases in one request (at most
   * `MAX_RENEWALS_PER_REQUEST`). Each item carries the Idempotency-Key `renew` would send for it, so a
   * renewal sent in a batch and sent alone are one request to the service. A refusal of one item is
   * that item's error, as `renew` would throw it; a failure of the request itself throws.
   */
  async renewMany(renewals: readonly RenewalRequest[], limits: CallLimits = {}): Promise<RenewalOutcome[]> {
    if (renewals.length === 0) return [];
    const answer = await this.#send({
      operation: 'renew_many',
      method: 'POST',
      path: '/v1/renewals',
      body: {
        renewals: renewals.map((renewal) => ({
          tenant: renewal.profile.tenant,
          profile_id: renewal.profile.id,
          lease_id: renewal.leaseId,
          requested_expires_at_ms: renewal.requestedExpiresAtMs,
          idempotency_key: renewIdempotencyKey(renewal.leaseId, renewal.requestedExpiresAtMs),
        })),
      },
      ...leaseLimits(limits),
    });
    const answered = this.#parse('renew_many', renewalsAnswerSchema, answer.body).renewals;
    if (answered.length !== renewals.length)
      throw errorFromTransport(
        'renew_many',
        'invalid_answer',
        new Error(`${renewals.length} renewals sent, ${answered.length} answered`),
      );
    return renewals.map((renewal, index): RenewalOutcome => {
      const item = answered[index];
      if (item?.lease_id !== renewal.leaseId)
        return {
          leaseId: renewal.leaseId,
          error: errorFromTransport('renew', 'invalid_answer', new Error('renewals answered out of order')),
        };
      if (item.status >= 200 && item.status < 300 && item.lease)
        return { leaseId: renewal.leaseId, lease: item.lease };
      return {
        leaseId: renewal.leaseId,
        error: errorFromAnswer('renew', item.status, item.error ? { error: item.error } : undefined),
      };
    });
  }

  async close(
    profile: ProfileRef,
    leaseId: string,
    { seal }: { seal: boolean },
    limits: CallLimits = {},
  ): Promise<LeaseView> {
    const answer = await this.#send({
      operation: 'close',
      method: 'POST',
      path: `${leasePath(profile, leaseId)}/close`,
      body: { seal },
      idempotencyKey: closeIdempotencyKey(leaseId, seal),
      ...leaseLimits(limits),
    });
    return this.#parse('close', leaseViewSchema, answer.body);
  }

  /** An effect: `sequence` must be the lease's last sequence + 1. Never sent twice by this client. */
  navigate(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    url: string,
    limits: CallLimits = {},
  ): Promise<PageCallResult> {
    return this.#page('navigate', profile, leaseId, limits, (deadlineMs) => ({
      sequence,
      url,
      deadline_ms: deadlineMs,
    }));
  }

  observe(
    profile: ProfileRef,
    leaseId: string,
    args: Record<string, unknown>,
    limits: CallLimits = {},
  ): Promise<PageCallResult> {
    return this.#page('observe', profile, leaseId, limits, (deadlineMs) => ({
      args,
      deadline_ms: deadlineMs,
    }));
  }

  /** An effect: `sequence` must be the lease's last sequence + 1. Never sent twice by this client. */
  act(
    profile: ProfileRef,
    leaseId: string,
    sequence: number,
    args: Record<string, unknown>,
    limits: CallLimits = {},
  ): Promise<PageCallResult> {
    return this.#page('act', profile, leaseId, limits, (deadlineMs) => ({
      sequence,
      args,
      deadline_ms: deadlineMs,
    }));
  }

  async #page(
    operation: 'navigate' | 'observe' | 'act',
    profile: ProfileRef,
    leaseId: string,
    limits: CallLimits,
    body: (serviceDeadlineMs: number) => Record<string, unknown>,
  ): Promise<PageCallResult> {
    const deadlineMs = limits.deadlineMs ?? Date.now() + DEFAULT_PAGE_CALL_TIMEOUT_MS;
    const serviceDeadlineMs = Math.min(SERVICE_DEADLINE_MAX_MS, deadlineMs - Date.now() - ANSWER_MARGIN_MS);
    if (limits.signal?.aborted || serviceDeadlineMs < 1)
      // Nothing has been sent: this is not an unknown outcome.
      throw new ProviderError(
        'provider_unavailable',
        `${operation} was not sent: ${limits.signal?.aborted ? 'the call was cancelled' : 'its deadline left no time'}`,
        false,
        { operation, transport: limits.signal?.aborted ? 'cancelled' : 'timeout' },
      );
    const answer = await this.#send({
      operation,
      method: 'POST',
      path: `${leasePath(profile, leaseId)}/${operation}`,
      body: body(serviceDeadlineMs),
      deadlineMs,
      signal: limits.signal,
    });
    const parsed = this.#parse(operation, pageAnswerSchema, answer.body);
    return {
      lease: parsed.lease,
      observation: parsed.observation,
      evidenceKey: parsed.evidence_key,
      artifacts: parsed.artifacts ?? {},
    };
  }

  /**
   * The element of an observed revision outlined on the page, stored by
   * the browser worker under `screenshot` when given; answers the artifact's name once the target
   * is found (the picture follows, as an act's does), none when it cannot be taken. Not an effect.
   */
  async preview(
    profile: ProfileRef,
    leaseId: string,
    args: { revision: string; element: string },
    limits: CallLimits = {},
    screenshot?: string,
  ): Promise<PageArtifacts> {
    const answer = await this.#send({
      operation: 'preview',
      method: 'POST',
      path: `${leasePath(profile, leaseId)}/preview`,
      body: { args, ...(screenshot ? { screenshot } : {}) },
      ...leaseLimits(limits),
    });
    return this.#parse('preview', previewAnswerSchema, answer.body).artifacts;
  }

  /**
   * A person takes the lease's page until `seconds` from now (the same holder renews): the agent's
   * page calls are refused `person_in_control` meanwhile. Answers once the page is the person's.
   */
  async startPersonControl(
    lease: LeaseRef,
    body: { holder: string; seconds: number },
    limits: CallLimits = {},
  ): Promise<PersonControlAnswer> {
    const answer = await this.#send({
      operation: 'person_control',
      method: 'POST',
      path: `${leasePath(lease.profile, lease.leaseId)}/person-control`,
      body,
      ...leaseLimits(limits),
    });
    return this.#parse('person_control', personControlAnswerSchema, answer.body);
  }

  /** The holder hands the page back: how long, how many inputs (never what), and the URL now. */
  async endPersonControl(
    lease: LeaseRef,
    body: { holder: string },
    limits: CallLimits = {},
  ): Promise<PersonControlEndAnswer> {
    const answer = await this.#send({
      operation: 'person_control',
      method: 'DELETE',
      path: `${leasePath(lease.profile, lease.leaseId)}/person-control`,
      body,
      ...leaseLimits(limits),
    });
    return this.#parse('person_control', personControlEndAnswerSchema, answer.body);
  }

  /** One batch of the holder's input (at most 50 events); answers the lease's sequence after it. */
  async sendPersonInput(
    lease: LeaseRef,
    body: { holder: string; events: readonly PersonInputEvent[] },
    limits: CallLimits = {},
  ): Promise<{ sequence: number }> {
    const answer = await this.#send({
      operation: 'person_input',
      method: 'POST',
      path: `${leasePath(lease.profile, lease.leaseId)}/input`,
      body,
      ...leaseLimits(limits),
    });
    return this.#parse('person_input', personInputAnswerSchema, answer.body);
  }

  /**
   * The lease's live view: its events as they come, until the lease closes or `signal` aborts (then
   * the iteration ends quietly). A refusal (no such lease, expired) throws before the first event.
   */
  async openLive(lease: LeaseRef, signal: AbortSignal): Promise<AsyncIterable<LiveEvent>> {
    let response: Response;
    try {
      response = await this.#fetch(`${this.baseUrl}${leasePath(lease.profile, lease.leaseId)}/live`, {
        headers: { authorization: `Bearer ${this.#token}`, accept: 'text/event-stream' },
        signal,
      });
    } catch (error) {
      if (signal.aborted) throw errorFromTransport('live', 'cancelled', error);
      throw errorFromTransport(
        'live',
        failedBeforeConnecting(error) ? 'not_connected' : 'connection_lost',
        error,
      );
    }
    if (!response.ok || !response.body) {
      const text = await response.text().catch(() => '');
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      throw errorFromAnswer('live', response.status, body);
    }
    const stream = response.body;
    return (async function* () {
      try {
        yield* readLiveEvents(stream);
      } catch (error) {
        if (!signal.aborted) throw error;
      }
    })();
  }

  #parse<T extends z.ZodType>(operation: DataPlaneOperation, schema: T, body: unknown): z.output<T> {
    const parsed = schema.safeParse(body);
    if (parsed.success) return parsed.data;
    throw errorFromTransport(operation, 'invalid_answer', parsed.error);
  }

  /** One HTTP exchange under one deadline; answers only a 2xx, throws a ProviderError otherwise. */
  async #send(request: Request): Promise<{ status: number; body: unknown; replayed: boolean }> {
    const { operation } = request;
    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(
      () => {
        timedOut = true;
        controller.abort();
      },
      Math.max(0, request.deadlineMs - Date.now()),
    );
    const onAbort = () => controller.abort();
    request.signal?.addEventListener('abort', onAbort, { once: true });
    if (request.signal?.aborted) controller.abort();

    const headers: Record<string, string> = { authorization: `Bearer ${this.#token}` };
    if (request.idempotencyKey !== undefined) headers['idempotency-key'] = request.idempotencyKey;
    let payload: string | undefined;
    if (request.body !== undefined) {
      payload = JSON.stringify(request.body);
      headers['content-type'] = 'application/json';
    }

    let status: number;
    let text: string;
    let replayed: boolean;
    try {
      const response = await this.#fetch(`${this.baseUrl}${request.path}`, {
        method: request.method,
        headers,
        body: payload,
        signal: controller.signal,
      });
      status = response.status;
      replayed = response.headers.get('idempotent-replayed') === 'true';
      text = await response.text();
    } catch (error) {
      if (timedOut) throw errorFromTransport(operation, 'timeout', error);
      if (request.signal?.aborted) throw errorFromTransport(operation, 'cancelled', error);
      throw errorFromTransport(
        operation,
        failedBeforeConnecting(error) ? 'not_connected' : 'connection_lost',
        error,
      );
    } finally {
      clearTimeout(timer);
      request.signal?.removeEventListener('abort', onAbort);
    }

    let body: unknown;
    try {
      body = text.length > 0 ? JSON.parse(text) : undefined;
    } catch (error) {
      if (status >= 200 && status < 300) throw errorFromTransport(operation, 'invalid_answer', error);
      body = undefined;
    }
    if (status < 200 || status >= 300) throw errorFromAnswer(operation, status, body);
    return { status, body, replayed };
  }
}

/** A tenant's profiles on the data plane: every profile path names its tenant. */
function tenantProfilesPath(tenant: string): string {
  return `/v1/tenants/${encodeURIComponent(tenant)}/profiles`;
}

function profilePath(profile: ProfileRef): string {
  return `${tenantProfilesPath(profile.tenant)}/${encodeURIComponent(profile.id)}`;
}

function leasePath(profile: ProfileRef, leaseId: string): string {
  return `${profilePath(profile)}/leases/${encodeURIComponent(leaseId)}`;
}

function leaseLimits(limits: CallLimits): { deadlineMs: number; signal: AbortSignal | undefined } {
  return {
    deadlineMs: limits.deadlineMs ?? Date.now() + DEFAULT_LEASE_CALL_TIMEOUT_MS,
    signal: limits.signal,
  };
}
