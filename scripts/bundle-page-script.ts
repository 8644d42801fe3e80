import { fileURLToPath } from 'node:url';
import { writePageAgentBundle } from '../libs/browser/page-script/bundle.js';

/**
 * Bundles the page agent into `page-agent.bundle.js` in the folder given (`npm run build` gives
 * dist's), or beside its sources (the tests' setup; a development run then loads it as well).
 */
const outDir = process.argv[2] ?? fileURLToPath(new URL('../libs/browser/page-script/', import.meta.url));
await writePageAgentBundle(outDir);
