/** One benchmark figure as DESIGN §10 prints it: the value beside a baseline measured in the same run. */
export interface BenchFigure {
  suite: string;
  metric: string;
  value: number;
  baseline_metric: string | null;
  baseline: number | null;
  ratio: number | null;
}

export function figure(
  suite: string,
  metric: string,
  value: number,
  baseline?: { metric: string; value: number },
): BenchFigure {
  const round = (n: number) => Math.round(n * 1000) / 1000;
  return {
    suite,
    metric,
    value: round(value),
    baseline_metric: baseline?.metric ?? null,
    baseline: baseline ? round(baseline.value) : null,
    ratio: baseline && baseline.value !== 0 ? round(value / baseline.value) : null,
  };
}

/** Prints a figure as one JSON line on stdout. */
export function report(entry: BenchFigure): void {
  process.stdout.write(`${JSON.stringify(entry)}\n`);
}

export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}
