import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { figure, percentile, report } from './report.js';

const SUITE = 'cli';
const RUNS = 15;
const BIN = fileURLToPath(new URL('../../bin/leasehold.mjs', import.meta.url));
const BUILT = new URL('../../dist/apps/cli/main.js', import.meta.url);
const SOURCE = new URL('../../apps/cli/program.ts', import.meta.url);

/** Wall time of one process from spawn to exit, ms; it must exit 0. */
function timed(args: string[]): number {
  const start = process.hrtime.bigint();
  const result = spawnSync(process.execPath, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (result.status !== 0)
    throw new Error(`node ${args.join(' ')} exited ${result.status}: ${result.stderr}`);
  return ms;
}

function samples(args: string[]): number[] {
  timed(args);
  return Array.from({ length: RUNS }, () => timed(args));
}

/**
 * `leasehold --help` as a user starts it (the bin, running the compiled CLI), beside `node -e 0`:
 * what Node itself takes to start on this machine now. Target: the median under 500 ms. Measured
 * on a build at least as new as the sources, or the bin would run them through tsx instead.
 */
export default async function cliBench(): Promise<void> {
  if (!existsSync(BUILT) || statSync(BUILT).mtimeMs < statSync(SOURCE).mtimeMs)
    throw new Error('dist/apps/cli/main.js is missing or older than the sources: npm run build first');
  const node = samples(['-e', '0']);
  const help = samples([BIN, '--help']);
  for (const p of [50, 95]) {
    const baseline = { metric: `node_e0_p${p}_ms`, value: percentile(node, p) };
    report(figure(SUITE, `leasehold_help_p${p}_ms`, percentile(help, p), baseline));
  }
}
