import {
  type Counter,
  type Gauge,
  type Histogram,
  METRICS,
  metricOf,
  type Registry,
} from '../telemetry/index.js';

/** The sweeper's own metrics; the ends it causes are counted by the lifecycle (`runs_ended_total`). */
export interface SweeperMetrics {
  readonly active: Gauge;
  readonly passes: Counter;
  readonly reclaimed: Counter;
  readonly deadlineExceeded: Counter;
  readonly staleApprovals: Counter;
  readonly requeued: Counter;
  /** Approvals the sweeper expired, by how long they waited (`decision="expired"`). */
  readonly approvalWait: Histogram<'decision'>;
}

export function createSweeperMetrics(registry: Registry): SweeperMetrics {
  return {
    active: metricOf(METRICS.sweeperActive, registry),
    passes: metricOf(METRICS.sweeperPasses, registry),
    reclaimed: metricOf(METRICS.runsReclaimed, registry),
    deadlineExceeded: metricOf(METRICS.runsDeadlineExceeded, registry),
    staleApprovals: metricOf(METRICS.approvalsStaleExpired, registry),
    requeued: metricOf(METRICS.runsRequeued, registry),
    approvalWait: metricOf(METRICS.approvalWait, registry),
  };
}
