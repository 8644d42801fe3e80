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
] as const;
export type ToolErrorCode = (typeof TOOL_ERROR_CODES)[number];

export const RUN_FAILURE_REASONS = [
  'budget_exceeded',
  'loop_detected',
  'reclaimed',
  'deadline_exceeded',
  'model_error',
  'cancelled',
] as const;
export type RunFailureReason = (typeof RUN_FAILURE_REASONS)[number];

export const API_ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  not_found: 404,
  conflict: 409,
  idempotency_conflict: 409,
  /** A stored record this version cannot read (issue 11.4): named, never a 500 on every call. */
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
