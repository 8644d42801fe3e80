import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const METRIC_PREFIX = 'leasehold_';

/** Counts of one queue's jobs by state, read when Prometheus scrapes. */
export type QueueCountsReader = () => Promise<Record<string, number>>;

export interface Metrics {
  readonly registry: Registry;
  /** Adds a queue to `leasehold_queue_jobs{queue,state}`; the returned function removes it. */
  watchQueue(queue: string, read: QueueCountsReader): () => void;
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
        for (const [state, count] of Object.entries(counts)) this.set({ queue, state }, count);
      }
    },
  });

  return {
    registry,
    watchQueue(queue, read) {
      queues.set(queue, read);
      return () => queues.delete(queue);
    },
  };
}
