import type { Counter, Histogram, Registry } from 'prom-client';
import { METRICS } from './catalogue.js';
import { metricOf } from './metric-of.js';

/** The HTTP metrics both servers (and the ops servers) count their requests in. */
export interface HttpMetrics {
  /** `leasehold_http_requests_total{server,method,route,status}`. */
  requests: Counter<'server' | 'method' | 'route' | 'status'>;
  /** `leasehold_http_request_duration_seconds{server,method,route}`. */
  seconds: Histogram<'server' | 'method' | 'route'>;
}

/**
 * The HTTP metrics of `registry`, from the catalogue. Built once per registry (`metricOf`), so the
 * fleet's API and data plane, which share one, count in the same two series by their `server` label.
 */
export function httpMetrics(registry: Registry): HttpMetrics {
  return {
    requests: metricOf(METRICS.httpRequests, registry),
    seconds: metricOf(METRICS.httpRequestSeconds, registry),
  };
}
