import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The page agent bundled into one self-contained script, written beside this module by the build. */
export const PAGE_AGENT_BUNDLE_FILE = 'page-agent.bundle.js';

const HERE = fileURLToPath(new URL('.', import.meta.url));

/**
 * The page agent as one self-contained script. `npm run build` bundles it (and the tests' global
 * setup, beside the sources) into {@link PAGE_AGENT_BUNDLE_FILE}; a process reads that file once,
 * so esbuild is a build tool, not part of the image. Run from the sources with the file missing or
 * older than a source (a developer's edit), it is bundled in the process instead.
 */
let loaded: Promise<string> | undefined;

export function pageAgentScript(): Promise<string> {
  loaded ??= readPageAgentScript(HERE);
  loaded.catch(() => {
    loaded = undefined;
  });
  return loaded;
}

/** The script from `builtDir`'s bundle, or bundled from `sourceDir` when that is missing or stale. */
export async function readPageAgentScript(builtDir: string, sourceDir = builtDir): Promise<string> {
  const built = join(builtDir, PAGE_AGENT_BUNDLE_FILE);
  const builtMs = await stat(built).then(
    (file) => file.mtimeMs,
    () => undefined,
  );
  if (builtMs !== undefined && (await newestSourceMs(sourceDir)) <= builtMs) return readFile(built, 'utf8');
  return bundlePageAgent(sourceDir);
}

/** The newest modification of the TypeScript sources in `dir`; none in a build's output. */
async function newestSourceMs(dir: string): Promise<number> {
  const names = (await readdir(dir).catch(() => [] as string[])).filter((name) => name.endsWith('.ts'));
  const times = await Promise.all(names.map(async (name) => (await stat(join(dir, name))).mtimeMs));
  return Math.max(0, ...times);
}

/** Bundles `page-agent.ts` of `sourceDir` with esbuild (a dev dependency: loaded only here). */
export async function bundlePageAgent(sourceDir = HERE): Promise<string> {
  const entry = join(sourceDir, 'page-agent.ts');
  if (!(await stat(entry).catch(() => undefined)))
    throw new Error(`the page agent bundle ${PAGE_AGENT_BUNDLE_FILE} is missing (npm run build writes it)`);
  const { build } = await import('esbuild');
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'chrome120',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  });
  const output = result.outputFiles[0];
  if (!output) throw new Error('esbuild produced no page agent bundle');
  return output.text;
}

/** Writes the bundle into `outDir`: the build's step (into dist) and the tests' setup (beside the sources). */
export async function writePageAgentBundle(outDir: string, sourceDir = HERE): Promise<void> {
  await writeFile(join(outDir, PAGE_AGENT_BUNDLE_FILE), await bundlePageAgent(sourceDir));
}
