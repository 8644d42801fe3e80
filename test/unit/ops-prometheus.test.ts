import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { DROPPED_DEFAULT_METRICS, METRICS } from '../../libs/telemetry/catalogue.js';

/**
 * The alert rules and the dashboard. promtool checks the rules and runs their unit
 * tests; every alert is tested firing and not firing; every metric the rules and the dashboard
 * query is one the fleet serves (the catalogue, or prom-client's standard process and Node.js
 * series, or Prometheus's own `up`).
 */

const OPS = fileURLToPath(new URL('../../ops', import.meta.url));
const ALERTS = `${OPS}/prometheus/alerts.yml`;
const ALERT_TESTS = `${OPS}/prometheus/alerts.test.yml`;
const DASHBOARD = `${OPS}/grafana/leasehold.json`;

interface AlertRules {
  groups: { name: string; rules: { alert?: string; record?: string; expr: string }[] }[];
}
interface AlertTests {
  tests: { name: string; alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
}
interface Panel {
  type: string;
  title: string;
  description?: string;
  leasehold_main?: boolean;
  datasource?: { type: string; uid: string };
  targets?: { expr: string }[];
}

const rules = parse(readFileSync(ALERTS, 'utf8')) as AlertRules;
const alertTests = parse(readFileSync(ALERT_TESTS, 'utf8')) as AlertTests;
const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] };
const alertNames = rules.groups.flatMap((group) =>
  group.rules.flatMap((rule) => (rule.alert ? [rule.alert] : [])),
);

function promtool(...args: string[]) {
  return spawnSync('promtool', args, { encoding: 'utf8', timeout: 20_000 });
}

/** Every series name the fleet serves: the catalogue's (histograms with their three series), the standard ones. */
function servedNames(): Set<string> {
  const names = new Set<string>(['up']);
  for (const entry of Object.values(METRICS)) {
    if (entry.type === 'histogram')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(entry.name + suffix);
    else names.add(entry.name);
  }
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  for (const metric of registry.getMetricsAsArray()) {
    if ((DROPPED_DEFAULT_METRICS as readonly string[]).includes(metric.name)) continue;
    const type = String(metric.type);
    if (type === 'histogram')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
    else names.add(metric.name);
  }
  return names;
}

/** Metric names in a PromQL expression: identifiers that are not functions, keywords, labels or label values. */
function metricNames(expr: string): string[] {
  const withoutStrings = expr.replace(/"(?:[^"\\]|\\.)*"/g, '""');
  const withoutMatchers = withoutStrings.replace(/\{[^}]*\}/g, '{}');
  const withoutGrouping = withoutMatchers.replace(
    /\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g,
    '',
  );
  const names = [...withoutGrouping.matchAll(/\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b(?!\s*\()/g)].map(
    (match) => match[1] ?? '',
  );
  const keywords = new Set(['and', 'or', 'unless', 'offset', 'bool', 'inf', 'nan', 'e']);
  return names.filter(
    (name) => !keywords.has(name.toLowerCase()) && !/^\d/.test(name) && !/^\d+[smhdwy]$/.test(name),
  );
}

describe('the alert rules (ops/prometheus/alerts.yml)', () => {
  it('pass promtool check rules', () => {
    const result = promtool('check', 'rules', ALERTS);
    expect(result.stdout + result.stderr).toMatch(/SUCCESS/);
    expect(result.status).toBe(0);
  });

  it('pass their unit tests (promtool test rules)', () => {
    const result = promtool('test', 'rules', ALERT_TESTS);
    expect(result.stdout + result.stderr).toMatch(/SUCCESS/);
    expect(result.status).toBe(0);
  });

  it('cover every alert the issue asks for', () => {
    expect(alertNames).toEqual(
      expect.arrayContaining([
        'LeaseholdRunsStuck',
        'LeaseholdQueueWaitHigh',
        'LeaseholdBrowserWorkerDown',
        'LeaseholdLeaseAcquireFailures',
        'LeaseholdRedisDown',
        'LeaseholdBudgetStopsRising',
      ]),
    );
  });

  it('test every alert firing and not firing', () => {
    const cases = alertTests.tests.flatMap((test) => test.alert_rule_test ?? []);
    for (const alert of alertNames) {
      const own = cases.filter((entry) => entry.alertname === alert);
      expect(
        own.some((entry) => (entry.exp_alerts ?? []).length > 0),
        `${alert} is tested firing`,
      ).toBe(true);
      expect(
        own.some((entry) => (entry.exp_alerts ?? []).length === 0),
        `${alert} is tested not firing`,
      ).toBe(true);
    }
  });

  it('query only metrics the fleet serves', () => {
    const served = servedNames();
    const unknown = rules.groups
      .flatMap((group) => group.rules)
      .flatMap((rule) =>
        metricNames(rule.expr)
          .filter((name) => !served.has(name))
          .map((name) => `${rule.alert}: ${name}`),
      );
    expect(unknown).toEqual([]);
  });
});

describe('the dashboard (ops/grafana/leasehold.json)', () => {
  const queries = dashboard.panels.flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({ panel, expr: target.expr })),
  );

  it('marks its main panels, one for each thing an operator reads first', () => {
    const main = dashboard.panels.filter((panel) => panel.leasehold_main === true);
    for (const panel of main) {
      expect(panel.description, panel.title).toMatch(/^\[main\] /);
      expect(panel.targets?.length, panel.title).toBeGreaterThan(0);
    }
    const mainMetrics = new Set(
      main.flatMap((panel) => (panel.targets ?? []).flatMap((target) => metricNames(target.expr))),
    );
    for (const metric of [
      'leasehold_queue_jobs',
      'leasehold_run_queue_wait_seconds_bucket',
      'leasehold_runs_ended_total',
      'leasehold_run_duration_seconds_bucket',
      'leasehold_leases_live',
      'leasehold_lease_acquire_seconds_bucket',
      'leasehold_settle_total',
      'leasehold_model_tokens_total',
      'leasehold_model_cost_usd_total',
      'leasehold_http_requests_total',
      'leasehold_approval_wait_seconds_bucket',
      'leasehold_lease_upkeep_leases_total',
    ])
      expect(mainMetrics, metric).toContain(metric);
  });

  it('queries only metrics the fleet serves, through the provisioned Prometheus', () => {
    const served = servedNames();
    const unknown = queries.flatMap(({ panel, expr }) =>
      metricNames(expr)
        .filter((name) => !served.has(name))
        .map((name) => `${panel.title}: ${name}`),
    );
    expect(unknown).toEqual([]);
    const provisioned = parse(
      readFileSync(`${OPS}/grafana/provisioning/datasources/prometheus.yml`, 'utf8'),
    ) as {
      datasources: { uid: string }[];
    };
    const uids = new Set(provisioned.datasources.map((source) => source.uid));
    for (const panel of dashboard.panels.filter((entry) => entry.type !== 'row'))
      expect(uids, panel.title).toContain(panel.datasource?.uid);
  });

  it('writes every query as plain PromQL, which promtool parses', () => {
    // The queries carry no Grafana variables, so a test or a script can send them to Prometheus as
    // they are; promtool parses them as recording rules.
    for (const { panel, expr } of queries) expect(expr, panel.title).not.toMatch(/\$/);
    const asRules = {
      groups: [
        {
          name: 'dashboard',
          rules: queries.map(({ expr }, index) => ({ record: `dashboard:query${index}`, expr })),
        },
      ],
    };
    const file = join(mkdtempSync(join(tmpdir(), 'leasehold-dashboard-')), 'queries.yml');
    writeFileSync(file, JSON.stringify(asRules));
    const result = promtool('check', 'rules', file);
    expect(result.stdout + result.stderr).toMatch(/SUCCESS/);
    expect(result.status).toBe(0);
  });

  it('finds a metric the fleet does not serve', () => {
    expect(metricNames('sum by (le) (rate(leasehold_nope_seconds_bucket{job="x"}[5m])) > 0')).toEqual([
      'leasehold_nope_seconds_bucket',
    ]);
    expect(servedNames().has('leasehold_nope_seconds_bucket')).toBe(false);
    expect(servedNames().has('nodejs_active_handles_total')).toBe(false);
  });
});
