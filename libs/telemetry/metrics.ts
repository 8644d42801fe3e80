import { collectDefaultMetrics, type Gauge, Registry } from 'prom-client';
import { DROPPED_DEFAULT_METRICS, METRICS, type MetricKey, type Role } from './catalogue.js';
import { type MetricFor, metricOf } from './metric-of.js';

export { Counter, Gauge, Histogram, Registry } from 'prom-client';

export const METRIC_PREFIX = 'leasehold_';

/** Counts of one queue's jobs by state, read when Prometheus scrapes. */
export type QueueCountsReader = () => Promise<Record<string, number>>;

/** One run's end as the one who ended it saw it (`leasehold_runs_ended_total`, `…_run_duration_seconds`). */
export interface RunEndFigures {
  status: string;
  /** The error code; `none` is counted for a success or a plain cancel. */
  code?: string | null | undefined;
  /** When the run was submitted (its `created_at_ms`); absent, no duration is observed. */
  submittedAtMs?: number | undefined;
  /** When it ended (its `ended_at_ms`); absent, now. */
  endedAtMs?: number | null | undefined;
}

/** How an approval was decided (`leasehold_approval_wait_seconds{decision}`). */
export type ApprovalDecision = 'approved' | 'denied' | 'expired';

export interface Metrics {
  readonly registry: Registry;
  /**
   * Whether this process's servers serve `registry` at `/metrics`. The fleet's roles share one
   * registry and only the API serves it, so no series is scraped twice; the roles' other servers
   * answer `/metrics` 404.
   */
  readonly served: boolean;
  /** The metric of a catalogue entry in this registry (built once; see `metricOf`). */
  of<Key extends MetricKey>(key: Key): MetricFor<(typeof METRICS)[Key]>;
  /** Adds a queue to `leasehold_queue_jobs{queue,state}`; the returned function removes it. */
  watchQueue(queue: string, read: QueueCountsReader): () => void;
  /**
   * Counts one run's end in `leasehold_runs_ended_total{status,code}` and its time from
   * submission in `leasehold_run_duration_seconds{status}`: called once by whoever ends
   * the run.
   */
  runEnded(end: RunEndFigures): void;
  /** Observes an approval's wait from its request to its decision. */
  approvalWaited(decision: ApprovalDecision, requestedAtMs: number, decidedAtMs: number): void;
}

/**
 * BullMQ keeps a prioritised job out of its wait list (resumed runs go first, so every
 * run job carries a priority), so the queue's depth is the two together, told as `waiting` (the
 * state BullMQ's counts name); `prioritized` is not told apart.
 */
export function queueDepthStates(counts: Record<string, number>): Record<string, number> {
  const { prioritized = 0, ...rest } = counts;
  return { ...rest, waiting: (rest.waiting ?? 0) + prioritized };
}

const ROLES: ReadonlySet<string> = new Set<Role>(['api', 'run-worker', 'browser-worker', 'sweeper']);

/** The catalogue's entries a process of `role` serves (`fleet`: every one; another name: none up front). */
function entriesOf(role: string | undefined): MetricKey[] {
  const keys = Object.keys(METRICS) as MetricKey[];
  if (role === 'fleet') return keys;
  if (!role || !ROLES.has(role)) return [];
  return keys.filter((key) => (METRICS[key].roles as readonly string[]).includes(role));
}

/**
 * Prom-client's standard process and Node.js series under their standard names
 * (`process_*`, `nodejs_*`, no prefix), less the three gauges promtool refuses.
 */
function collectStandardMetrics(registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  for (const name of DROPPED_DEFAULT_METRICS) registry.removeSingleMetric(name);
}

/**
 * One registry per process (the fleet shares one across its roles, `role: 'fleet'`), labelled
 * with `labels`. A known `role` gets every catalogue entry it serves at once, so each is exposed
 * (with its help and type) from the first scrape and nothing else is; any other role builds
 * entries as they are first used.
 */
export function createMetrics(labels: Record<string, string> = {}): Metrics {
  const registry = new Registry();
  registry.setDefaultLabels(labels);
  collectStandardMetrics(registry);

  const queues = new Map<string, QueueCountsReader>();
  // Read at scrape time: each watched queue's counts, a queue that cannot be read left out.
  const queueJobs = (): Gauge<'queue' | 'state'> =>
    metricOf(METRICS.queueJobs, registry, {
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
  const of = <Key extends MetricKey>(key: Key) => metricOf(METRICS[key], registry);
  for (const key of entriesOf(labels.role)) {
    if (key === 'queueJobs') queueJobs();
    else of(key);
  }

  return {
    registry,
    served: true,
    of,
    watchQueue(queue, read) {
      queueJobs();
      queues.set(queue, read);
      return () => queues.delete(queue);
    },
    runEnded({ status, code, submittedAtMs, endedAtMs }) {
      of('runsEnded').inc({ status, code: code || 'none' });
      if (submittedAtMs === undefined) return;
      const durationMs = (endedAtMs ?? Date.now()) - submittedAtMs;
      of('runDuration').observe({ status }, Math.max(0, durationMs) / 1000);
    },
    approvalWaited(decision, requestedAtMs, decidedAtMs) {
      of('approvalWait').observe({ decision }, Math.max(0, decidedAtMs - requestedAtMs) / 1000);
    },
  };
}

/** The same registry and metrics, not served by this process's servers (see `Metrics.served`). */
export function unserved(metrics: Metrics): Metrics {
  return { ...metrics, served: false };
}
