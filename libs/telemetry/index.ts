export { addressBlock } from './address-block.js';
export { METRICS, type MetricEntry, type MetricKey, type Role } from './catalogue.js';
export { EventStreamWriter } from './event-stream-writer.js';
export { type EventStreamOptions, type RunEventSource, RunEventStreams } from './event-streams.js';
export {
  AddressBudget,
  AUTH_FAILURE_WINDOW_MS,
  type Door,
  type DoorKeeper,
  FailedAuthLimiter,
  guardDoors,
  markDoor,
  PUBLIC_ROUTE,
  refuseCredential,
} from './http-doors.js';
export {
  errorBody,
  errorCodeForStatus,
  frameworkErrorAnswer,
  notFoundBody,
  reshapeErrorAnswers,
  sendFrameworkError,
  unavailableBody,
} from './http-errors.js';
export { type HttpMetrics, httpMetrics } from './http-metrics.js';
export {
  createLeaseMetrics,
  type LeaseMetrics,
  recordSettle,
  type SettleOutcome,
} from './lease-metrics.js';
export { createLogger, type Logger, type LoggerOptions } from './logger.js';
export { type GaugeCollect, type LabelsOf, type MetricFor, metricOf } from './metric-of.js';
export {
  type ApprovalDecision,
  Counter,
  createMetrics,
  Gauge,
  Histogram,
  METRIC_PREFIX,
  type Metrics,
  type QueueCountsReader,
  Registry,
  type RunEndFigures,
  unserved,
} from './metrics.js';
export { createHttpServer, createOpsServer, type ReadinessCheck, registerOpsRoutes } from './ops-routes.js';
export {
  logTenantOf,
  REQUEST_ID_HEADER,
  requestIdOf,
  type TenantReader,
  UNMATCHED_ROUTE,
} from './request-log.js';
