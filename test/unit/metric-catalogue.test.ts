import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  ModelCallError,
  meteredModel,
  modelLabel,
  modelMetricsOf,
  OTHER_MODEL,
} from '../../libs/models/index.js';
import { executionsCounter } from '../../libs/run-worker/run-job.js';
import type { Model } from '../../libs/runtime/index.js';
import { createSweeperMetrics } from '../../libs/sweeper/sweeper-metrics.js';
import { DROPPED_DEFAULT_METRICS, METRICS, type Role } from '../../libs/telemetry/catalogue.js';
import { catalogueTable } from '../../libs/telemetry/catalogue-table.js';
import { createLeaseMetrics, createMetrics } from '../../libs/telemetry/index.js';
import { metricOf } from '../../libs/telemetry/metric-of.js';

const ROLES: readonly Role[] = ['api', 'run-worker', 'browser-worker', 'sweeper'];
const STANDARD = /^(process|nodejs)_/;

function catalogueNames(role: Role | 'fleet'): string[] {
  return Object.values(METRICS)
    .filter((entry) => role === 'fleet' || (entry.roles as readonly Role[]).includes(role))
    .map((entry) => entry.name)
    .sort();
}

async function registeredNames(registry: ReturnType<typeof createMetrics>['registry']) {
  return (await registry.getMetricsAsJSON()).map((metric) => metric.name);
}

/** One sample's value: the metric's series whose labels include `labels` (and named `sampleName`). */
async function sample(
  metrics: ReturnType<typeof createMetrics>,
  name: string,
  labels: Record<string, string>,
  sampleName = name,
): Promise<number | undefined> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name);
  return metric?.values.find(
    (value) =>
      ((value as { metricName?: string }).metricName ?? name) === sampleName &&
      Object.entries(labels).every(([label, wanted]) => value.labels[label] === wanted),
  )?.value;
}

describe('the metric catalogue', () => {
  for (const role of [...ROLES, 'fleet'] as const)
    it(`gives the ${role} registry exactly its catalogue entries beside the standard series`, async () => {
      const names = await registeredNames(createMetrics({ role }).registry);
      expect(names.filter((name) => !STANDARD.test(name)).sort()).toEqual(catalogueNames(role));
      // Standard names, so stock Node.js dashboards find them; never the gauges promtool refuses.
      expect(names).toContain('process_cpu_user_seconds_total');
      expect(names).toContain('process_resident_memory_bytes');
      expect(names).toContain('nodejs_heap_size_used_bytes');
      expect(names).toContain('nodejs_active_handles');
      expect(names.filter((name) => (DROPPED_DEFAULT_METRICS as readonly string[]).includes(name))).toEqual(
        [],
      );
    });

  it("adds nothing to a role's registry when the role's own metrics are built on it", async () => {
    const browser = createMetrics({ role: 'browser-worker' });
    const leaseMetrics = createLeaseMetrics(browser.registry);
    expect(createLeaseMetrics(browser.registry).settles).toBe(leaseMetrics.settles);
    expect((await registeredNames(browser.registry)).filter((name) => !STANDARD.test(name)).sort()).toEqual(
      catalogueNames('browser-worker'),
    );
    const sweeper = createMetrics({ role: 'sweeper' });
    createSweeperMetrics(sweeper.registry);
    sweeper.approvalWaited('expired', 1_000, 61_000);
    expect((await registeredNames(sweeper.registry)).filter((name) => !STANDARD.test(name)).sort()).toEqual(
      catalogueNames('sweeper'),
    );
    const worker = createMetrics({ role: 'run-worker' });
    executionsCounter(worker.registry).inc({ outcome: 'succeeded' });
    expect((await registeredNames(worker.registry)).filter((name) => !STANDARD.test(name)).sort()).toEqual(
      catalogueNames('run-worker'),
    );
  });

  it('builds each metric from its entry: name, kind, help, labels and buckets', async () => {
    const { registry } = createMetrics();
    for (const entry of Object.values(METRICS)) {
      const metric = metricOf(entry, registry);
      expect(metricOf(entry, registry)).toBe(metric);
      const [json] = (await registry.getMetricsAsJSON()).filter((m) => m.name === entry.name);
      expect({ name: json?.name, type: json?.type, help: json?.help }).toEqual({
        name: entry.name,
        type: entry.type,
        help: entry.help,
      });
    }
    const histogram = metricOf(METRICS.approvalWait, registry);
    histogram.observe({ decision: 'approved' }, 2);
    const text = await registry.getSingleMetricAsString(METRICS.approvalWait.name);
    for (const bound of METRICS.approvalWait.buckets)
      expect(text).toContain(`le="${bound}",decision="approved"`);
  });

  it('counts a run end with its duration from submission, by status', async () => {
    const metrics = createMetrics({ role: 'api' });
    metrics.runEnded({ status: 'failed', code: 'reclaimed', submittedAtMs: 1_000, endedAtMs: 31_000 });
    metrics.runEnded({ status: 'succeeded', code: null, submittedAtMs: 1_000, endedAtMs: 3_000 });
    expect(await sample(metrics, METRICS.runsEnded.name, { status: 'failed', code: 'reclaimed' })).toBe(1);
    expect(await sample(metrics, METRICS.runsEnded.name, { status: 'succeeded', code: 'none' })).toBe(1);
    const sum = `${METRICS.runDuration.name}_sum`;
    expect(await sample(metrics, METRICS.runDuration.name, { status: 'failed' }, sum)).toBe(30);
    expect(await sample(metrics, METRICS.runDuration.name, { status: 'succeeded' }, sum)).toBe(2);
  });

  it('refuses a metric whose name another kind holds in the registry', () => {
    const { registry } = createMetrics();
    metricOf(METRICS.leasesLive, registry);
    expect(() => metricOf({ ...METRICS.runsEnded, name: METRICS.leasesLive.name }, registry)).toThrow(
      /leasehold_leases_live/,
    );
  });
});

describe("the README's metric catalogue", () => {
  it('has a row for every catalogue entry, as catalogueTable() renders it', () => {
    // Cells compared trimmed: the formatter pads a table's columns to one width.
    const cells = (line: string) =>
      line
        .split('|')
        .map((cell) => cell.trim())
        .join('|');
    const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8')
      .split('\n')
      .map(cells);
    const rows = catalogueTable()
      .split('\n')
      .filter((line) => line.startsWith('| `'))
      .map(cells);
    expect(rows).toHaveLength(Object.keys(METRICS).length);
    expect(rows.filter((row) => !readme.includes(row))).toEqual([]);
  });
});

describe('the model metrics', () => {
  const usage = { inputTokens: 120, cachedInputTokens: 20, outputTokens: 8 };
  const price = {
    inputMicroUsdPerMtok: 2_500_000,
    cachedInputMicroUsdPerMtok: 1_250_000,
    outputMicroUsdPerMtok: 10_000_000,
    contextWindowTokens: 100_000,
  };

  it('labels a model the deployment does not list `other`, so a client cannot add series', () => {
    const listed = { tester: {} };
    expect(modelLabel(listed, 'tester')).toBe('tester');
    expect(modelLabel(listed, 'scripted')).toBe('scripted');
    expect(modelLabel(listed, 'gpt-anything-a-client-names')).toBe(OTHER_MODEL);
    expect(modelLabel(listed, 'constructor')).toBe(OTHER_MODEL);
  });

  it('counts a call, its tokens by kind and its cost, and a failed call by its code with its billed tokens', async () => {
    const metrics = createMetrics({ role: 'run-worker' });
    const answering: Model = { name: 'tester', call: async () => ({ toolCalls: [], answer: 'done', usage }) };
    await meteredModel(answering, modelMetricsOf(metrics), 'tester', price).call(
      { transcript: [], tools: [] },
      { deadlineMs: Date.now() + 1_000 },
    );
    const failing: Model = {
      name: 'tester',
      call: async () => {
        throw new ModelCallError('no answer', 'model_unavailable', 503, usage);
      },
    };
    await expect(
      meteredModel(failing, modelMetricsOf(metrics), 'tester', price).call(
        { transcript: [], tools: [] },
        { deadlineMs: Date.now() + 1_000 },
      ),
    ).rejects.toThrow('no answer');
    const tokens = METRICS.modelTokens.name;
    expect(await sample(metrics, METRICS.modelCalls.name, { model: 'tester', result: 'ok' })).toBe(1);
    expect(await sample(metrics, METRICS.modelCalls.name, { result: 'model_unavailable' })).toBe(1);
    expect(await sample(metrics, tokens, { model: 'tester', kind: 'input' })).toBe(200);
    expect(await sample(metrics, tokens, { model: 'tester', kind: 'cached_input' })).toBe(40);
    expect(await sample(metrics, tokens, { model: 'tester', kind: 'output' })).toBe(16);
    // Each call: 100 × 2.5 + 20 × 1.25 + 8 × 10 = 355 µUSD.
    expect(await sample(metrics, METRICS.modelCost.name, { model: 'tester' })).toBeCloseTo(0.00071, 9);
  });
});
