import { Counter, collectDefaultMetrics, Gauge, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const METRIC_PREFIX = 'leasehold_';

/** Counts of one queue's jobs by state, read when Prometheus scrapes. */
export type QueueCountsReader = () => Promise<Record<string, number>>;

export interface Metrics {
  readonly registry: Registry;
  /** Adds a queue to `leasehold_queue_jobs{queue,state}`; the returned function removes it. */
  watchQueue(queue: string, read: QueueCountsReader): () => void;
  /**
   * Counts one run's end in `leasehold_runs_ended_total{status,code}` (issue 12): called once by
   * whoever ends the run (`code` is the error code, `none` for a success or a plain cancel);
   * `count` ends at once (a sweep pass).
   */
  runEnded(status: string, code?: string | null, count?: number): void;
}

/**
 * BullMQ keeps a prioritised job out of its wait list (issue 12: resumed runs go first, so every
 * run job carries a priority), so the queue's depth is the two together, told as `waiting` (the
 * state BullMQ's counts name); `prioritized` is not told apart.
 */
export function queueDepthStates(counts: Record<string, number>): Record<string, number> {
  const { prioritized = 0, ...rest } = counts;
  return { ...rest, waiting: (rest.waiting ?? 0) + prioritized };
}

/**
 * One registry per process (the fleet shares one across its roles), with the process metrics
 * under the `leasehold_` prefix and the BullMQ queue gauges.
 */
export function createMetrics(labels: Record<string, string> = {}): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectDefaultMetrics({ register: registry, prefix: METRIC_PREFIX });

  const queues = new Map<string, QueueCountsReader>();
  new Gauge({
    name: `${METRIC_PREFIX}queue_jobs`,
    help: 'Jobs in each BullMQ queue by state, read at scrape time.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const [queue, read] of queues) {
        const counts = await read().catch(() => undefined);
        if (!counts) continue;
        for (const [state, count] of Object.entries(queueDepthStates(counts)))
          this.set({ queue, state }, count);
      }
    },
  });
  const runsEnded = new Counter({
    name: `${METRIC_PREFIX}runs_ended_total`,
    help: 'Runs ended by this process, by status and error code (each end counted once, by whoever ended it).',
    labelNames: ['status', 'code'],
    registers: [registry],
  });

  return {
    registry,
    watchQueue(queue, read) {
      queues.set(queue, read);
      return () => queues.delete(queue);
    },
    runEnded(status, code, count = 1) {
      runsEnded.inc({ status, code: code || 'none' }, count);
    },
  };
}
