import { DATA_PLANE_ERROR_STATUS, type DataPlaneErrorCode, LeaseholdError } from '../contracts/index.js';

/**
 * A refusal or failure of the data plane, with a stable code and its HTTP status. `details` carry
 * only identifiers and numbers (the holding run, the current sequence) — never page content.
 */
export class DataPlaneError extends LeaseholdError<DataPlaneErrorCode> {
  override readonly name = 'DataPlaneError';
  constructor(
    code: DataPlaneErrorCode,
    message: string,
    readonly details: Record<string, string | number | boolean> = {},
    options?: { cause?: unknown; retryable?: boolean },
  ) {
    super(code, message, options?.retryable ?? code === 'provider_unavailable', options);
  }

  get status(): number {
    return DATA_PLANE_ERROR_STATUS[this.code];
  }
}
