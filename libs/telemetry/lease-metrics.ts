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
  /** Issue 14 (ADR-0159): settles after navigate and act, by tool and result (`dom_quiet`, `bound_expired`). */
  settles: Counter<'tool' | 'result'>;
  /** Issue 14: how long each settle took, by tool. */
  settleSeconds: Histogram<'tool'>;
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
    settles: new Counter({
      name: 'leasehold_settle_total',
      help: 'Settles after navigate and act, by tool and result (dom_quiet, or bound_expired at the 2 s bound).',
      labelNames: ['tool', 'result'],
      registers,
    }),
    // ADR-0159: a settle takes at least the 0.3 s quiet window and at most the 2 s bound.
    settleSeconds: new Histogram({
      name: 'leasehold_settle_seconds',
      help: 'Time from a navigate or act to its settled page, by tool.',
      labelNames: ['tool'],
      buckets: [0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 1.5, 2, 3],
      registers,
    }),
  };
}

/** A settle as the page engine tells it (`SettleResult` of the browser tools contract). */
export interface SettleOutcome {
  result: string;
  elapsed_ms: number;
}

/**
 * Issue 14: what a page engine's `onSettle` is given: counts each settle and, at debug, logs one
 * line with its tool, result and time. Never throws (the engine calls it mid-operation).
 */
export function recordSettle(
  metrics: Pick<LeaseMetrics, 'settles' | 'settleSeconds'>,
  log?: { debug(fields: Record<string, unknown>, message: string): void },
): (tool: string, settle: SettleOutcome) => void {
  return (tool, settle) => {
    try {
      metrics.settles.inc({ tool, result: settle.result });
      metrics.settleSeconds.observe({ tool }, settle.elapsed_ms / 1000);
      log?.debug({ tool, settle: settle.result, elapsed_ms: settle.elapsed_ms }, 'page settled');
    } catch {
      // A metric or log line lost is not worth failing the page's call over.
    }
  };
}
