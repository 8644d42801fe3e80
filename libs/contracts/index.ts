export * from './api-keys.js';
export * from './bounded-json.js';
export * from './browser-tools.js';
export * from './canonical-json.js';
export * from './data-plane.js';
export {
  API_ERROR_STATUS,
  ApiError,
  type ApiErrorBody,
  type ApiErrorCode,
  assertNever,
  isRunErrorCode,
  isToolErrorCode,
  LeaseholdError,
  RateLimitedError,
  RUN_ERROR_CODES,
  RUN_ERROR_TABLE,
  RUN_FAILURE_REASONS,
  type RunErrorCode,
  type RunFailureReason,
  type RunOutcome,
  TOOL_ERROR_CODES,
  type ToolErrorCode,
  toolFailureEnd,
} from './errors.js';
export { type IdKind, isScheduleId, newId, recordIdSchema } from './ids.js';
export * from './mcp-browser.js';
export { microUsdToUsd, usdToMicroUsd } from './money.js';
export * from './output-schema.js';
export * from './person-control.js';
export * from './run-files.js';
export * from './run-lifecycle.js';
export * from './run-secrets.js';
export * from './run-steps.js';
export * from './runs.js';
export * from './schedules.js';
export * from './webhooks.js';
