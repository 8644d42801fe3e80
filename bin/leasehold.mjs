#!/usr/bin/env node
// `leasehold`, the npm bin (issue 16). In a checkout it runs the TypeScript source through tsx
// (a devDependency); where only the build is there (`npm run build`: dist/, no apps/ sources, no
// tsx — a production install), it runs the compiled dist/apps/cli/main.js.
import { existsSync } from 'node:fs';

const source = new URL('../apps/cli/main.ts', import.meta.url);
const built = new URL('../dist/apps/cli/main.js', import.meta.url);

async function tsxRegistered() {
  try {
    const { register } = await import('tsx/esm/api');
    register();
    return true;
  } catch {
    return false;
  }
}

if (existsSync(source) && (await tsxRegistered())) await import(source.href);
else if (existsSync(built)) await import(built.href);
else {
  console.error(
    'leasehold: neither apps/cli/main.ts with tsx nor dist/apps/cli/main.js (npm run build) is here',
  );
  process.exitCode = 1;
}
