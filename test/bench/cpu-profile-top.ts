import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/**
 * `npx tsx test/bench/cpu-profile-top.ts <file.cpuprofile | folder> [count] [--last-ms N]`: the functions with the
 * most self time in each V8 CPU profile (as `node --cpu-prof` writes them; the runs bench writes
 * them with BENCH_CPU_PROF_DIR), with their share of the profile's samples, and the share spent in
 * garbage collection and idle. For finding where a process's time goes, not a figure of a suite.
 */
interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** `lastMs`: only the samples of the profile's last this many milliseconds (the timed part). */
function top(file: string, count: number, lastMs: number | undefined): void {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as CpuProfile;
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const hits = new Map<string, number>();
  const byPackage = new Map<string, number>();
  let elapsedUs = profile.timeDeltas.reduce((sum, delta) => sum + delta, 0);
  const fromUs = lastMs === undefined ? 0 : elapsedUs - lastMs * 1000;
  elapsedUs = 0;
  const kept: number[] = [];
  profile.samples.forEach((id, index) => {
    elapsedUs += profile.timeDeltas[index] ?? 0;
    if (elapsedUs >= fromUs) kept.push(id);
  });
  profile.samples = kept;
  for (const id of profile.samples) {
    const frame = byId.get(id)?.callFrame;
    if (!frame) continue;
    const owner = frame.url.includes('node_modules/')
      ? (/node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(frame.url)?.[1] ?? 'node_modules')
      : frame.url.startsWith('node:')
        ? 'node'
        : frame.url
          ? (/\/(apps|libs|queues|test)\//.exec(frame.url)?.[1] ?? 'other')
          : frame.functionName;
    byPackage.set(owner, (byPackage.get(owner) ?? 0) + 1);
    const where = frame.url
      ? `${frame.url.replace(/^.*node_modules\//, '~/').replace(/^file:\/\/.*?\/(apps|libs|queues|test)\//, '$1/')}:${frame.lineNumber + 1}`
      : '';
    const label = `${frame.functionName || '(anonymous)'} ${where}`.trim();
    hits.set(label, (hits.get(label) ?? 0) + 1);
  }
  const total = profile.samples.length;
  const busy = total - (hits.get('(idle)') ?? 0);
  process.stdout.write(`${file}: ${total} samples, ${((busy / total) * 100).toFixed(1)}% busy\n`);
  const shares = (entries: Map<string, number>) =>
    [...entries].filter(([label]) => label !== '(idle)').sort((a, b) => b[1] - a[1]);
  process.stdout.write(
    `  by owner: ${shares(byPackage)
      .slice(0, 12)
      .map(([owner, n]) => `${owner} ${((n / busy) * 100).toFixed(1)}%`)
      .join(', ')}\n`,
  );
  for (const [label, n] of shares(hits).slice(0, count))
    process.stdout.write(`  ${((n / busy) * 100).toFixed(1).padStart(5)}% of busy  ${label}\n`);
}

const args = process.argv.slice(2);
const lastAt = args.indexOf('--last-ms');
const lastMs = lastAt >= 0 ? Number(args.splice(lastAt, 2)[1]) : undefined;
const [target, countArg] = args;
if (!target) {
  process.stderr.write(
    'usage: npx tsx test/bench/cpu-profile-top.ts <file.cpuprofile | folder> [count] [--last-ms N]\n',
  );
  process.exit(2);
}
const files = statSync(target).isDirectory()
  ? readdirSync(target)
      .filter((file) => file.endsWith('.cpuprofile'))
      .map((file) => join(target, file))
  : [target];
for (const file of files) top(file, Number(countArg ?? 25), lastMs);
