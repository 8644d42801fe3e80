import type { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { METRICS } from './catalogue.js';
import { metricOf } from './metric-of.js';

/** The lease service's metrics. */
export interface LeaseMetrics {
  liveLeases: Gauge;
  contextsOpen: Gauge;
  operations: Counter<'op' | 'result'>;
  acquireSeconds: Histogram<'result'>;
  /** Contexts given to new leases, by `source`: warm (the pool's) or cold (made then). */
  contexts: Counter<'source'>;
  expiryCloses: Counter;
  sequenceRefusals: Counter;
  /** Acquires whose profile's sealed state did not open here, by `code`: seal_key_mismatch or profile_unreadable. */
  sealRefusals: Counter<'code'>;
  /** `stage` capture (the page gave no image) or store (the write failed). */
  screenshotFailures: Counter<'stage'>;
  /** ADR-0159: settles after navigate and act, by tool and result (`dom_quiet`, `bound_expired`). */
  settles: Counter<'tool' | 'result'>;
  /** How long each settle took, by tool. */
  settleSeconds: Histogram<'tool'>;
}

/** The browser worker's lease metrics, from the catalogue (built once per registry, see `metricOf`). */
export function createLeaseMetrics(registry: Registry): LeaseMetrics {
  return {
    screenshotFailures: metricOf(METRICS.screenshotFailures, registry),
    liveLeases: metricOf(METRICS.leasesLive, registry),
    contextsOpen: metricOf(METRICS.contextsOpen, registry),
    operations: metricOf(METRICS.leaseOperations, registry),
    acquireSeconds: metricOf(METRICS.leaseAcquireSeconds, registry),
    contexts: metricOf(METRICS.leaseContexts, registry),
    expiryCloses: metricOf(METRICS.leaseExpiryCloses, registry),
    sequenceRefusals: metricOf(METRICS.leaseSequenceRefusals, registry),
    sealRefusals: metricOf(METRICS.sealRefusals, registry),
    settles: metricOf(METRICS.settles, registry),
    settleSeconds: metricOf(METRICS.settleSeconds, registry),
  };
}

/** A settle as the page engine tells it (`SettleResult` of the browser tools contract). */
export interface SettleOutcome {
  result: string;
  elapsed_ms: number;
}

/**
 * What a page engine's `onSettle` is given: counts each settle and, at debug, logs one
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
