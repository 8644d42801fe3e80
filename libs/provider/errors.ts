import { LeaseholdError, TOOL_ERROR_CODES, type ToolErrorCode } from '../contracts/index.js';
import { type PageCallResult, pageAnswerSchema } from './answers.js';

/**
 * The stable codes a provider call fails with: the `tool.browser.*` codes of DESIGN §8 and
 * `sequence_mismatch` as the service answers it. The run loop prefixes them with `tool.browser.`.
 */
export const PROVIDER_ERROR_CODES = [...TOOL_ERROR_CODES, 'sequence_mismatch'] as const;
export type ProviderErrorCode = (typeof PROVIDER_ERROR_CODES)[number];

/** The data-plane calls a provider makes; `navigate` and `act` are effects. */
export type DataPlaneOperation =
  | 'create_profile'
  | 'list_profiles'
  | 'acquire'
  | 'get_lease'
  | 'renew'
  /** Many renewals in one request; each item's own answer reads as a `renew`'s. */
  | 'renew_many'
  | 'close'
  | 'navigate'
  | 'observe'
  | 'act'
  /** An approval card's outlined screenshot; not an effect. */
  | 'preview'
  /** A person on the page: the live view, the control's start and end, the holder's input. */
  | 'live'
  | 'person_control'
  | 'person_input'
  /** What became of an effect handed over unanswered; not an effect, though it may skip one. */
  | 'handover';

export const EFFECT_OPERATIONS: ReadonlySet<DataPlaneOperation> = new Set(['navigate', 'act']);

/**
 * ADR-0127 d3 (amended by ADR-0129): the refusals the page engine gives before dispatch. An effect
 * answered with one of these did not happen and its lease stays trusted; any other answer but success
 * leaves the effect's outcome unknown.
 */
export const REFUSALS_BEFORE_DISPATCH: ReadonlySet<string> = new Set([
  'page_changed',
  'element_not_found',
  'action_not_allowed',
  'url_disallowed',
  'grant_not_applicable',
  'secret_not_allowed',
  'person_in_control',
]);

/**
 * The refusals the service answers an effect with together with `dispatched` (and, once dispatched,
 * the lease's `sequence`): the run side then knows what happened and keeps the lease.
 */
export const TOLD_REFUSALS: ReadonlySet<string> = new Set([
  'page_changed',
  'element_not_found',
  'action_not_allowed',
  'url_disallowed',
  'invalid_arguments',
  'secret_not_allowed',
  'person_in_control',
]);

/** Whether a refusal of an effect came after its dispatch (the lease's sequence advanced). */
export function refusedAfterDispatch(error: ProviderError): boolean {
  return error.facts.dispatched === true;
}

/** How a request failed to get an answer. `not_connected` means no byte reached the service. */
export type TransportFailure =
  | 'not_connected'
  | 'connection_lost'
  | 'timeout'
  | 'cancelled'
  | 'invalid_answer';

export interface ProviderErrorDetails {
  operation: DataPlaneOperation;
  /** The HTTP status the service answered, when it answered. */
  httpStatus?: number;
  /** The service's own error code, when it answered one (e.g. `lease_expired` behind `outcome_unknown`). */
  serviceCode?: string;
  /** How the transport failed, when no usable answer came. */
  transport?: TransportFailure;
  /** Identifiers and numbers only (holding run, current sequence): never page content. */
  facts?: Record<string, string | number | boolean>;
  /**
   * ADR-0177: the bounded acquisition retry ran out (attempts or time) on failures that would have
   * permitted another attempt; the failure is kept, and the outcome is explicitly unverified.
   */
  unverified?: boolean;
  /** `navigation_failed` only: the lease and the error page the failed navigation left. */
  page?: PageCallResult;
  cause?: unknown;
}

/**
 * A failed data-plane call with a stable code and whether another attempt may help (only
 * acquisition is ever retried, ADR-0177). Messages name the call and the code, never page content,
 * tokens or the service's free text.
 */
export class ProviderError extends LeaseholdError<ProviderErrorCode> {
  override readonly name = 'ProviderError';
  readonly operation: DataPlaneOperation;
  readonly httpStatus: number | undefined;
  readonly serviceCode: string | undefined;
  readonly transport: TransportFailure | undefined;
  readonly facts: Readonly<Record<string, string | number | boolean>>;
  readonly unverified: boolean;
  /** `navigation_failed` only: the lease and the error page the failed navigation left, when answered. */
  readonly page: PageCallResult | undefined;

  constructor(code: ProviderErrorCode, message: string, retryable: boolean, details: ProviderErrorDetails) {
    super(code, message, retryable, details.cause === undefined ? undefined : { cause: details.cause });
    this.operation = details.operation;
    this.httpStatus = details.httpStatus;
    this.serviceCode = details.serviceCode;
    this.transport = details.transport;
    this.facts = Object.freeze({ ...(details.facts ?? {}) });
    this.unverified = details.unverified ?? false;
    this.page = details.page;
  }

  /** The same stable failure (code, message, facts), marked unverified (ADR-0177); caused by this one. */
  asUnverified(): ProviderError {
    return new ProviderError(this.code, this.message, this.retryable, {
      operation: this.operation,
      ...(this.httpStatus !== undefined ? { httpStatus: this.httpStatus } : {}),
      ...(this.serviceCode !== undefined ? { serviceCode: this.serviceCode } : {}),
      ...(this.transport !== undefined ? { transport: this.transport } : {}),
      facts: { ...this.facts },
      unverified: true,
      ...(this.page !== undefined ? { page: this.page } : {}),
      cause: this,
    });
  }
}

const TOOL_CODES: ReadonlySet<string> = new Set(TOOL_ERROR_CODES);

function isToolCode(code: string): code is ToolErrorCode {
  return TOOL_CODES.has(code);
}

/** Keeps only identifier-like facts from an error body (strings under 128 characters, numbers, booleans). */
function factsOf(error: Record<string, unknown>): Record<string, string | number | boolean> {
  const facts: Record<string, string | number | boolean> = {};
  for (const [key, value] of Object.entries(error)) {
    if (key === 'code' || key === 'message') continue;
    if (typeof value === 'number' || typeof value === 'boolean') facts[key] = value;
    else if (typeof value === 'string' && /^[A-Za-z0-9_.:@-]{1,128}$/.test(value)) facts[key] = value;
  }
  return facts;
}

/** The `{error: {code, …}}` of a data-plane answer, if it has one. */
export function serviceErrorOf(body: unknown): {
  code: string;
  facts: Record<string, string | number | boolean>;
} {
  if (body && typeof body === 'object' && 'error' in body) {
    const error = (body as { error: unknown }).error;
    if (error && typeof error === 'object' && typeof (error as { code?: unknown }).code === 'string') {
      const record = error as Record<string, unknown>;
      return { code: record.code as string, facts: factsOf(record) };
    }
  }
  return { code: 'unknown', facts: {} };
}

/**
 * ADR-0159: what a `page_changed` marked `capture_timed_out` says. The code stays (earlier
 * references are void), but the cause is the call's time running out, not a page seen to change.
 */
const CAPTURE_TIMED_OUT =
  "the page's capture timed out before the call's deadline: earlier references are void, so observe again";

/**
 * The error for a data-plane answer that was not a success (DESIGN §8, ADR-0127 d3):
 * an effect answered anything but a refusal before dispatch is `outcome_unknown` (or
 * `profile_unavailable` where the service refused the lease itself); otherwise 502/503 are a
 * retryable `provider_unavailable`, and the service's tool codes keep their meaning.
 */
export function errorFromAnswer(
  operation: DataPlaneOperation,
  httpStatus: number,
  body: unknown,
): ProviderError {
  const { code: serviceCode, facts } = serviceErrorOf(body);
  const details = { operation, httpStatus, serviceCode, facts };
  const said = `${operation} answered ${httpStatus} ${serviceCode}`;

  if (EFFECT_OPERATIONS.has(operation)) {
    // The navigation's request never reached a server: nothing happened, the sequence advanced
    // with the dispatch (the page shows Chromium's error page) and the lease stays trusted.
    if (
      serviceCode === 'navigation_failed' &&
      facts.dispatched === true &&
      typeof facts.sequence === 'number'
    ) {
      const page = failedNavigationPage(body);
      const netError = typeof facts.net_error === 'string' ? ` (${facts.net_error})` : '';
      return new ProviderError(
        'navigation_failed',
        `${said}: the navigation never reached a server${netError}`,
        false,
        page === undefined ? details : { ...details, page },
      );
    }
    // The service says what became of the effect: refused before dispatch, or dispatched with the
    // lease's sequence advanced to `facts.sequence` (the lease provider moves its own with it).
    if (facts.dispatched === false && TOLD_REFUSALS.has(serviceCode) && isToolCode(serviceCode))
      return new ProviderError(serviceCode, `${said}: refused before dispatch`, false, details);
    if (
      facts.dispatched === true &&
      typeof facts.sequence === 'number' &&
      TOLD_REFUSALS.has(serviceCode) &&
      isToolCode(serviceCode)
    )
      return new ProviderError(
        serviceCode,
        facts.capture_timed_out === true
          ? `${said}: dispatched, then ${CAPTURE_TIMED_OUT}`
          : `${said}: dispatched, then refused by the page`,
        false,
        details,
      );
    // Legacy answers without the mark: the list of refusals the page engine gives before dispatch.
    if (
      facts.dispatched === undefined &&
      REFUSALS_BEFORE_DISPATCH.has(serviceCode) &&
      isToolCode(serviceCode)
    )
      return new ProviderError(serviceCode, `${said}: refused before dispatch`, false, details);
    if (serviceCode === 'profile_unavailable')
      return new ProviderError(
        'profile_unavailable',
        `${said}: the service refused the lease`,
        false,
        details,
      );
    // ADR-0127 d3: no other answer proves the effect did not happen; it is never retried.
    return new ProviderError(
      'outcome_unknown',
      `${said}: the effect may or may not have happened`,
      false,
      details,
    );
  }

  if (httpStatus === 502 || httpStatus === 503)
    return new ProviderError(
      'provider_unavailable',
      `${said}: the browser worker is unavailable`,
      true,
      details,
    );
  switch (serviceCode) {
    case 'page_changed':
      return new ProviderError(
        serviceCode,
        facts.capture_timed_out === true ? `${said}: ${CAPTURE_TIMED_OUT}` : said,
        false,
        details,
      );
    case 'profile_unavailable':
    case 'lease_expired':
    case 'element_not_found':
    case 'action_not_allowed':
    case 'url_disallowed':
    case 'grant_not_applicable':
    case 'invalid_arguments':
    case 'navigation_failed':
    case 'secret_not_allowed':
    case 'person_in_control':
      return new ProviderError(serviceCode, said, false, details);
    case 'seal_key_mismatch':
    case 'profile_unreadable':
      // ADR-0177: a permanent refusal; no attempt of this acquisition or any other opens the state.
      return new ProviderError(serviceCode, `${said}: ${sealRefusal(serviceCode, facts)}`, false, details);
    case 'sequence_mismatch':
      return new ProviderError('sequence_mismatch', said, false, details);
    case 'validation_failed':
    case 'payload_too_large':
      return new ProviderError('invalid_arguments', said, false, details);
    case 'not_found':
      // A profile the tenant cannot see cannot be leased; a lease the service no longer knows is gone.
      return operation === 'acquire' || operation === 'create_profile' || operation === 'list_profiles'
        ? new ProviderError('profile_unavailable', said, false, details)
        : new ProviderError('lease_expired', said, false, details);
    case 'conflict':
      return new ProviderError('profile_unavailable', said, false, details);
    case 'idempotency_in_progress':
      // The first request with this key is still being answered: asking again later replays it.
      return new ProviderError('provider_unavailable', said, true, details);
    default:
      // unauthorized, idempotency_conflict, internal, anything unknown: another attempt cannot help.
      return new ProviderError('provider_unavailable', said, false, details);
  }
}

/**
 * What a refused sealed state means, told from the answer's identifiers alone (the service's own
 * words stay out): which profile, which worker, and the fingerprints of the keys involved.
 */
function sealRefusal(
  code: 'seal_key_mismatch' | 'profile_unreadable',
  facts: Readonly<Record<string, string | number | boolean>>,
): string {
  const profile =
    typeof facts.tenant === 'string' && typeof facts.profile_id === 'string'
      ? `profile ${facts.tenant}/${facts.profile_id}`
      : 'the profile';
  const worker =
    typeof facts.worker_id === 'string' ? `browser worker ${facts.worker_id}` : 'the browser worker';
  const sealedWith = typeof facts.sealed_with === 'string' ? ` ${facts.sealed_with}` : '';
  if (code === 'seal_key_mismatch') {
    const holds = typeof facts.worker_key === 'string' ? ` (its seal key is ${facts.worker_key})` : '';
    return `${profile} was sealed with key${sealedWith}, which ${worker} does not hold${holds}`;
  }
  return sealedWith
    ? `${profile}'s sealed state does not open on ${worker} with the key that sealed it,${sealedWith}`
    : `${profile}'s sealed state names no key and opens with none of the keys ${worker} holds`;
}

/** The lease and error page answered beside a `navigation_failed`, when they parse. */
function failedNavigationPage(body: unknown): PageCallResult | undefined {
  const record = (body ?? {}) as Record<string, unknown>;
  const parsed = pageAnswerSchema.safeParse({
    lease: record.lease,
    observation: record.observation,
    evidence_key: record.evidence_key ?? null,
  });
  if (!parsed.success) return undefined;
  return {
    lease: parsed.data.lease,
    observation: parsed.data.observation,
    evidenceKey: parsed.data.evidence_key,
    artifacts: {},
  };
}

/**
 * The error for a call that got no usable answer. A request that never connected cannot have had an
 * effect, but is not retryable either; for an effect any other loss is `outcome_unknown` (ADR-0127
 * d3). Otherwise connection refused or lost and timeouts are a retryable `provider_unavailable`.
 */
export function errorFromTransport(
  operation: DataPlaneOperation,
  transport: TransportFailure,
  cause?: unknown,
): ProviderError {
  const details = { operation, transport, cause };
  if (EFFECT_OPERATIONS.has(operation) && transport !== 'not_connected')
    return new ProviderError(
      'outcome_unknown',
      `${operation} got no answer (${transport}): the effect may or may not have happened`,
      false,
      details,
    );
  // ADR-0127 d3: an effect is never retried, not even one that never connected.
  const retryable =
    !EFFECT_OPERATIONS.has(operation) && transport !== 'cancelled' && transport !== 'invalid_answer';
  return new ProviderError(
    'provider_unavailable',
    `${operation} got no answer (${transport}) from the browser worker`,
    retryable,
    details,
  );
}

const NOT_CONNECTED_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'UND_ERR_CONNECT_TIMEOUT']);

/** Whether a `fetch` failure happened before the connection was made (so nothing was sent). */
export function failedBeforeConnecting(error: unknown): boolean {
  const cause = (error as { cause?: unknown } | undefined)?.cause ?? error;
  const code = (cause as { code?: unknown } | undefined)?.code;
  if (typeof code === 'string' && NOT_CONNECTED_CODES.has(code)) return true;
  // Node tries each address of a host; it reports an AggregateError when all refuse.
  if (cause instanceof AggregateError)
    return cause.errors.length > 0 && cause.errors.every((inner) => failedBeforeConnecting(inner));
  return false;
}
