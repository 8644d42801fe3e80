export {
  type AcquireAttemptDiagnostic,
  type AcquireRetryDecision,
  type AcquireRetryPolicy,
  type AcquireStopReason,
  type AcquireWithRetryOptions,
  acquireBackoffMs,
  acquireWithRetry,
  BOUNDED_ACQUIRE_RETRY,
  compileAcquireRetryPolicy,
  decideAfterFailedAcquire,
  permitsAnotherAttempt,
  SINGLE_ACQUIRE_ATTEMPT,
} from './acquire-retry.js';
export {
  acquireAnswerSchema,
  leaseViewSchema,
  type PageCallResult,
  pageAnswerSchema,
  profileViewSchema,
} from './answers.js';
export {
  BROWSER_TOOL_NAMES,
  type BrowserToolHooks,
  type BrowserToolLimits,
  type BrowserToolName,
  type BrowserToolResult,
  executeBrowserTool,
} from './browser-tools.js';
export {
  type AcquireResult,
  ANSWER_MARGIN_MS,
  type CallLimits,
  DataPlaneClient,
  type DataPlaneClientOptions,
  DEFAULT_LEASE_CALL_TIMEOUT_MS,
  DEFAULT_PAGE_CALL_TIMEOUT_MS,
  type LeaseRef,
  type RenewalOutcome,
  type RenewalRequest,
} from './client.js';
export {
  type DataPlaneOperation,
  EFFECT_OPERATIONS,
  errorFromAnswer,
  errorFromTransport,
  failedBeforeConnecting,
  PROVIDER_ERROR_CODES,
  ProviderError,
  type ProviderErrorCode,
  REFUSALS_BEFORE_DISPATCH,
  type TransportFailure,
} from './errors.js';
export {
  acquireIdempotencyKey,
  closeIdempotencyKey,
  renewIdempotencyKey,
  replacingAcquireIdempotencyKey,
} from './idempotency-keys.js';
export {
  BrowserLeaseProvider,
  type BrowserLeaseProviderOptions,
  BrowserWorkerAway,
  type BrowserWorkerLocation,
  type DispatchedEffect,
  type HeldLease,
  type LeaseDropReason,
} from './lease-provider.js';
export { readLiveEvents } from './live-stream.js';
