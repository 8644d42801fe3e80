export * from './api-keys.js';
export * from './bounded-json.js';
export * from './browser-tools.js';
export * from './data-plane.js';
export {
  API_ERROR_STATUS,
  ApiError,
  type ApiErrorBody,
  type ApiErrorCode,
  LeaseholdError,
  RUN_FAILURE_REASONS,
  type RunFailureReason,
  TOOL_ERROR_CODES,
  type ToolErrorCode,
} from './errors.js';
export { type IdKind, newId, recordIdSchema } from './ids.js';
export { microUsdToUsd, usdToMicroUsd } from './money.js';
export * from './runs.js';
