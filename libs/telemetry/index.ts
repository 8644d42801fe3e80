export { createLeaseMetrics, type LeaseMetrics } from './lease-metrics.js';
export { createLogger, type Logger, type LoggerOptions } from './logger.js';
export {
  Counter,
  createMetrics,
  Gauge,
  Histogram,
  METRIC_PREFIX,
  type Metrics,
  type QueueCountsReader,
  Registry,
} from './metrics.js';
export { createHttpServer, createOpsServer, type ReadinessCheck, registerOpsRoutes } from './ops-routes.js';
