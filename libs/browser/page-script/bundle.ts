import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

/**
 * The page agent as one self-contained script. It is bundled from its source with esbuild on first
 * use and cached for the process: no generated file to keep in step with its source, and a clean
 * clone works after `npm ci` alone. Bundling takes tens of milliseconds, once.
 */
let bundled: Promise<string> | undefined;

function entryPoint(): string {
  // Run from source (tsx, vitest) the entry is the .ts file; from a tsc build, the emitted .js.
  for (const extension of ['.ts', '.js']) {
    const path = fileURLToPath(new URL(`./page-agent${extension}`, import.meta.url));
    if (existsSync(path)) return path;
  }
  throw new Error('the page agent source (libs/browser/page-script/page-agent.ts) is missing');
}

export function pageAgentScript(): Promise<string> {
  bundled ??= build({
    entryPoints: [entryPoint()],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'chrome120',
    minify: true,
    legalComments: 'none',
    logLevel: 'silent',
  }).then((result) => {
    const output = result.outputFiles[0];
    if (!output) throw new Error('esbuild produced no page agent bundle');
    return output.text;
  });
  bundled.catch(() => {
    bundled = undefined;
  });
  return bundled;
}
