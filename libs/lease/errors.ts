import {
  DATA_PLANE_ERROR_STATUS,
  type DataPlaneErrorCode,
  LeaseholdError,
  type LeaseView,
} from '../contracts/index.js';

/** What a failed navigation answers beside its error: the lease (its sequence advanced) and the error page. */
export interface FailedNavigationPage {
  lease: LeaseView;
  observation: unknown;
  evidenceKey: string | null;
}

/**
 * A refusal or failure of the data plane, with a stable code and its HTTP status. `details` carry
 * only identifiers and numbers (the holding run, the current sequence) — never page content.
 */
export class DataPlaneError extends LeaseholdError<DataPlaneErrorCode> {
  override readonly name = 'DataPlaneError';
  /** `navigation_failed` only: the lease after the call and the page it now shows, answered beside the error. */
  readonly page: FailedNavigationPage | undefined;
  constructor(
    code: DataPlaneErrorCode,
    message: string,
    readonly details: Record<string, string | number | boolean> = {},
    options?: { cause?: unknown; retryable?: boolean; page?: FailedNavigationPage },
  ) {
    super(code, message, options?.retryable ?? code === 'provider_unavailable', options);
    this.page = options?.page;
  }

  get status(): number {
    return DATA_PLANE_ERROR_STATUS[this.code];
  }
}

/**
 * The refusal of a request whose Idempotency-Key is not its to claim (DESIGN §5): used with another
 * request, or still being answered for the first one. One wording for the single routes and the
 * batch renewals' items alike.
 */
export function unclaimedKeyError(status: 'conflict' | 'pending'): DataPlaneError {
  return status === 'conflict'
    ? new DataPlaneError('idempotency_conflict', 'this Idempotency-Key was used with another request')
    : new DataPlaneError(
        'idempotency_in_progress',
        'the first request with this Idempotency-Key is still being answered',
      );
}
