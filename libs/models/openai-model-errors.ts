import { LeaseholdError } from '../contracts/index.js';
import { ModelError, type ModelUsage } from '../runtime/index.js';

/** No tokens: what a failed call is billed unless the server reported usage, and an optional usage left out. */
export const ZERO_USAGE: ModelUsage = Object.freeze({
  inputTokens: 0,
  cachedInputTokens: 0,
  outputTokens: 0,
});

export type AttemptFailureCode = 'http_status' | 'connection' | 'timeout' | 'invalid_output' | 'unexpected';

/** Why a model call failed; every code fails the run `model_error` (`deadline_exceeded` may map to the run's). */
export type ModelCallErrorCode =
  | 'model_rejected'
  | 'model_unavailable'
  | 'invalid_output'
  | 'invalid_request'
  | 'deadline_exceeded';

export class ModelCallError extends ModelError {
  constructor(
    message: string,
    override readonly code: ModelCallErrorCode,
    readonly status?: number,
    usage: ModelUsage = ZERO_USAGE,
  ) {
    super(message, usage, code);
  }
}

/** A failed attempt: whether another may follow, what to report, and any tokens it was billed. */
export class AttemptFailure extends LeaseholdError<AttemptFailureCode> {
  override readonly name = 'AttemptFailure';
  constructor(
    code: AttemptFailureCode,
    readonly detail: string,
    retryable: boolean,
    readonly extra: { status?: number; retryAfterMs?: number; usage?: ModelUsage } = {},
  ) {
    super(code, detail, retryable);
  }
}
