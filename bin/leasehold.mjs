#!/usr/bin/env node
// `leasehold`, the npm bin. It runs the compiled CLI, dist/apps/cli/main.js, which `npm run build`
// writes (and `npm ci` through the `prepare` script): starting compiles no TypeScript. tsx (a
// devDependency) runs the sources only in a checkout whose build is missing or older than them,
// so a change to the CLI is never run stale while it is developed.
import { existsSync, readdirSync, statSync } from 'node:fs';

const root = new URL('../', import.meta.url);
const built = new URL('dist/apps/cli/main.js', root);
const source = new URL('apps/cli/main.ts', root);
/** What the CLI is compiled from: its own folder and the typed client it speaks through. */
const SOURCE_FOLDERS = ['apps/cli/', 'apps/cli/commands/', 'clients/typescript/'];

function newestSourceMs() {
  let newest = 0;
  for (const folder of SOURCE_FOLDERS) {
    const url = new URL(folder, root);
    if (!existsSync(url)) continue;
    for (const name of readdirSync(url))
      if (name.endsWith('.ts')) newest = Math.max(newest, statSync(new URL(name, url)).mtimeMs);
  }
  return newest;
}

async function tsxRegistered() {
  try {
    const { register } = await import('tsx/esm/api');
    register();
    return true;
  } catch {
    return false;
  }
}

const hasBuild = existsSync(built);
const stale = hasBuild && existsSync(source) && newestSourceMs() > statSync(built).mtimeMs;
if (hasBuild && !stale) await import(built.href);
else if (existsSync(source) && (await tsxRegistered())) await import(source.href);
else if (hasBuild) await import(built.href);
else {
  console.error('leasehold: no dist/apps/cli/main.js: build it with `npm run build` (or `npm ci`)');
  process.exitCode = 1;
}
