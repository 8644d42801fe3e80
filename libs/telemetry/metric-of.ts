import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { MetricEntry } from './catalogue.js';

/** The label names an entry declares (none: `never`, so a value can only be set without labels). */
export type LabelsOf<Entry extends MetricEntry> = Entry extends {
  labelNames: readonly (infer Label extends string)[];
}
  ? Label
  : never;

/** The prom-client metric an entry of the catalogue builds. */
export type MetricFor<Entry extends MetricEntry> = Entry['type'] extends 'counter'
  ? Counter<LabelsOf<Entry>>
  : Entry['type'] extends 'gauge'
    ? Gauge<LabelsOf<Entry>>
    : Histogram<LabelsOf<Entry>>;

/** What a gauge read at scrape time adds to its entry (`leasehold_queue_jobs`). */
export interface GaugeCollect {
  collect(this: Gauge<string>): Promise<void> | void;
}

const KINDS = { counter: Counter, gauge: Gauge, histogram: Histogram } as const;

/**
 * The metric of a catalogue entry in `registry`: its name, help, labels and buckets come
 * from the entry alone. Built once per registry: a second call answers the metric the first built,
 * so roles that share a registry (the fleet) share each series, and a role's registry can be given
 * every entry of the role at start (`createMetrics`) before the code that updates them runs.
 */
export function metricOf<const Entry extends MetricEntry>(
  entry: Entry,
  registry: Registry,
  extra?: GaugeCollect,
): MetricFor<Entry> {
  const kind = KINDS[entry.type];
  const existing = registry.getSingleMetric(entry.name);
  if (existing) {
    if (!(existing instanceof kind))
      throw new Error(
        `metric ${entry.name} is registered as another kind than the catalogue's ${entry.type}`,
      );
    return existing as unknown as MetricFor<Entry>;
  }
  const configuration = {
    name: entry.name,
    help: entry.help,
    labelNames: [...(entry.labelNames ?? [])],
    registers: [registry],
  };
  const built =
    entry.type === 'counter'
      ? new Counter(configuration)
      : entry.type === 'gauge'
        ? new Gauge({ ...configuration, ...(extra ? { collect: extra.collect } : {}) })
        : new Histogram({ ...configuration, ...(entry.buckets ? { buckets: [...entry.buckets] } : {}) });
  return built as unknown as MetricFor<Entry>;
}
