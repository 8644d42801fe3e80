/**
 * The stable error codes of DESIGN §8 in one table: each code's HTTP status on the REST and data
 * plane surfaces. A code is never reused for another meaning.
 */
export const TOOL_ERROR_CODES = [
  'provider_unavailable',
  'profile_unavailable',
  'lease_expired',
  'outcome_unknown',
  'page_changed',
  'element_not_found',
  'action_not_allowed',
  'url_disallowed',
  'grant_not_applicable',
  'invalid_arguments',
  'navigation_failed',
  'secret_not_allowed',
  'person_in_control',
  'seal_key_mismatch',
  'profile_unreadable',
] as const;
export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];

/** Why a run failed when no single tool's code says it (DESIGN §8). */
export const RUN_FAILURE_REASONS = [
  'budget_exceeded',
  'loop_detected',
  'reclaimed',
  'deadline_exceeded',
  'model_error',
  'cancelled',
  'internal_error',
  'approval_denied',
  'child_failed',
  'child_cancelled',
  'invalid_output',
  'person_timeout',
] as const;
export type RunFailureReason = (typeof RUN_FAILURE_REASONS)[number];

/**
 * A run's error code (truthful ends): a run failure reason, or the code of the tool whose
 * failure ended the run. `model_error` is the model's alone.
 */
export const RUN_ERROR_CODES = [...RUN_FAILURE_REASONS, ...TOOL_ERROR_CODES] as const;
export type RunErrorCode = (typeof RUN_ERROR_CODES)[number];

/**
 * What a code does to a run:
 * - `fails_run`: the run ends `failed` with this code (a run failure reason, or a tool failure no
 *   model can recover from: the browser is not there for it, however it calls);
 * - `cancels_run`: the run ends `cancelled`;
 * - `tool_result`: the failure goes back to the model as the tool's result, which is how a model
 *   recovers (observe again, act on the new revision, navigate elsewhere). A scripted run has no
 *   judgement to recover with: it stops at its first failing step with this code, unless that step
 *   says `"may_fail": true`.
 */
export type RunOutcome = 'fails_run' | 'cancels_run' | 'tool_result';

/**
 * The one table from code to run outcome and HTTP status (where the code is answered over HTTP: the
 * data plane's status for a tool code; null where no surface answers it). A code is never reused.
 */
export const RUN_ERROR_TABLE = {
  budget_exceeded: { outcome: 'fails_run', httpStatus: null },
  loop_detected: { outcome: 'fails_run', httpStatus: null },
  reclaimed: { outcome: 'fails_run', httpStatus: null },
  deadline_exceeded: { outcome: 'fails_run', httpStatus: null },
  model_error: { outcome: 'fails_run', httpStatus: null },
  cancelled: { outcome: 'cancels_run', httpStatus: null },
  internal_error: { outcome: 'fails_run', httpStatus: null },
  // A denial is the owner's answer: the model hears it and may do something else (a script stops).
  approval_denied: { outcome: 'tool_result', httpStatus: null },
  // A child's end is its parent's tool result; a scripted parent stops there.
  child_failed: { outcome: 'tool_result', httpStatus: null },
  child_cancelled: { outcome: 'tool_result', httpStatus: null },
  // The final answer did not take the caller's output_schema, after its one correction turn.
  invalid_output: { outcome: 'fails_run', httpStatus: null },
  // The run asked for a person and nobody took the page over in time (PERSON_REQUEST_TIMEOUT_MS).
  person_timeout: { outcome: 'fails_run', httpStatus: null },
  // ADR-0177: the bounded acquisition retry (three attempts) is already spent when a call answers
  // this; calling again only spends the budget against the same wall.
  provider_unavailable: { outcome: 'fails_run', httpStatus: 503 },
  // ADR-0127 d7: another run still needs the profile's page; no call of this run frees it.
  profile_unavailable: { outcome: 'fails_run', httpStatus: 409 },
  // The provider drops the lease and the next call acquires afresh (DESIGN §5).
  lease_expired: { outcome: 'tool_result', httpStatus: 409 },
  // ADR-0127 d3: the lease is retired; the model may observe the fresh page and decide.
  outcome_unknown: { outcome: 'tool_result', httpStatus: 502 },
  page_changed: { outcome: 'tool_result', httpStatus: 409 },
  element_not_found: { outcome: 'tool_result', httpStatus: 409 },
  action_not_allowed: { outcome: 'tool_result', httpStatus: 409 },
  url_disallowed: { outcome: 'tool_result', httpStatus: 409 },
  grant_not_applicable: { outcome: 'tool_result', httpStatus: 409 },
  invalid_arguments: { outcome: 'tool_result', httpStatus: 422 },
  // The navigation's request never reached a server (Chromium's `net::` name says why): nothing
  // happened, the lease is kept, and the model may navigate elsewhere or try again later.
  navigation_failed: { outcome: 'tool_result', httpStatus: 502 },
  // Browser tools 1.4.0: a declared secret asked into a field or origin it is not for; refused
  // before dispatch, so the model may fill the right field (a prompt-injected one gets nothing).
  secret_not_allowed: { outcome: 'tool_result', httpStatus: 409 },
  // A person holds the page (a takeover): refused before dispatch; the run waits for the hand-back.
  person_in_control: { outcome: 'tool_result', httpStatus: 409 },
  // The profile's sealed state names a key the browser worker does not hold: no call of this run,
  // and no other attempt, opens it (ADR-0177's permanent refusal). The worker's keys must change.
  seal_key_mismatch: { outcome: 'fails_run', httpStatus: 409 },
  // The state does not open with the very key that sealed it: damaged, or not this profile's.
  profile_unreadable: { outcome: 'fails_run', httpStatus: 409 },
} as const satisfies Record<RunErrorCode, { outcome: RunOutcome; httpStatus: number | null }>;

export function isRunErrorCode(code: string): code is RunErrorCode {
  return Object.hasOwn(RUN_ERROR_TABLE, code);
}

/**
 * Whether a failed tool call ends its run, and with which code. `scripted`: the call is a script's
 * step (no judgement to recover with); `mayFail`: that step said `"may_fail": true`. A code outside
 * the table (a tool of the future) is answered as a tool result to a model and ends a script
 * `internal_error`, naming the code in the message.
 */
export function toolFailureEnd(
  code: string,
  call: { scripted: boolean; mayFail: boolean },
): { ends: false } | { ends: true; code: RunErrorCode } {
  if (!isRunErrorCode(code))
    return call.scripted && !call.mayFail ? { ends: true, code: 'internal_error' } : { ends: false };
  const outcome: RunOutcome = RUN_ERROR_TABLE[code].outcome;
  switch (outcome) {
    case 'fails_run':
      // A step that may fail goes on past anything a tool answers; the run's own limits still end it.
      return call.mayFail && isToolErrorCode(code) ? { ends: false } : { ends: true, code };
    case 'cancels_run':
      return { ends: true, code };
    case 'tool_result':
      return call.scripted && !call.mayFail ? { ends: true, code } : { ends: false };
    default:
      return assertNever(outcome);
  }
}

export function isToolErrorCode(code: string): code is ToolErrorCode {
  return (TOOL_ERROR_CODES as readonly string[]).includes(code);
}

/** The end of every exhaustive switch: a value the types say cannot be. */
export function assertNever(value: never, what = 'value'): never {
  throw new Error(`unexpected ${what} ${JSON.stringify(value)}`);
}

export const API_ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  /** A key refused an act on a record it can see (the key driving a run decides none of its approvals). */
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  idempotency_conflict: 409,
  /** Another person holds the run's page (or asked to): one person at a time; others watch. */
  person_in_control: 409,
  /** A stored record this version cannot read: named, never a 500 on every call. */
  record_unreadable: 409,
  payload_too_large: 413,
  validation_failed: 422,
  rate_limited: 429,
  unavailable: 503,
  internal: 500,
} as const satisfies Record<string, number>;
export type ApiErrorCode = keyof typeof API_ERROR_STATUS;

/** The body of every REST and data-plane error: never a stack trace, never page content. */
export interface ApiErrorBody {
  error: { code: string; message: string };
}

/** An error with a stable code, whether a retry may help, and the cause kept for logs only. */
export class LeaseholdError<Code extends string = string> extends Error {
  override readonly name: string = 'LeaseholdError';
  constructor(
    readonly code: Code,
    message: string,
    readonly retryable = false,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export class ApiError extends LeaseholdError<ApiErrorCode> {
  override readonly name = 'ApiError';
  get status(): number {
    return API_ERROR_STATUS[this.code];
  }
}

/**
 * 429 `rate_limited` that says when a retry may pass: the REST answer carries `Retry-After` in
 * whole seconds (at least 1), rounded up from `retryAfterMs`.
 */
export class RateLimitedError extends ApiError {
  constructor(
    message: string,
    readonly retryAfterMs: number,
  ) {
    super('rate_limited', message, true);
  }
  get retryAfterSeconds(): number {
    return Math.max(1, Math.ceil(this.retryAfterMs / 1_000));
  }
}
