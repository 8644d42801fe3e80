import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

/** The lease service's metrics (issue 3 §9). */
export interface LeaseMetrics {
  liveLeases: Gauge;
  contextsOpen: Gauge;
  operations: Counter<'op' | 'result'>;
  acquireSeconds: Histogram<'result'>;
  expiryCloses: Counter;
  sequenceRefusals: Counter;
  /** Issue 13: `stage` capture (the page gave no image) or store (the write failed). */
  screenshotFailures: Counter<'stage'>;
}

export function createLeaseMetrics(registry: Registry): LeaseMetrics {
  const registers = [registry];
  return {
    screenshotFailures: new Counter({
      name: 'leasehold_screenshot_failures_total',
      help: 'Screenshots after navigate and act, or of approval previews, that could not be captured or stored, by stage.',
      labelNames: ['stage'],
      registers,
    }),
    liveLeases: new Gauge({
      name: 'leasehold_leases_live',
      help: 'Leases whose pages this worker holds.',
      registers,
    }),
    contextsOpen: new Gauge({
      name: 'leasehold_browser_contexts_open',
      help: 'Browser contexts open in this worker.',
      registers,
    }),
    operations: new Counter({
      name: 'leasehold_lease_operations_total',
      help: 'Lease operations by kind (acquire, renew, close) and result.',
      labelNames: ['op', 'result'],
      registers,
    }),
    acquireSeconds: new Histogram({
      name: 'leasehold_lease_acquire_seconds',
      help: 'Time to answer an acquire, by result (created or reattached).',
      labelNames: ['result'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    }),
    expiryCloses: new Counter({
      name: 'leasehold_lease_expiry_closes_total',
      help: 'Leases closed unsealed because they expired.',
      registers,
    }),
    sequenceRefusals: new Counter({
      name: 'leasehold_lease_sequence_refusals_total',
      help: 'Navigate or act calls refused before dispatch for a sequence that was not the next one.',
      registers,
    }),
  };
}
