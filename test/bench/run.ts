import { readdirSync } from 'node:fs';

/**
 * `npm run bench -- <suite>`: runs `test/bench/<suite>.bench.ts`, whose default export is an async
 * function printing one JSON line per figure (see report.ts). With no suite, lists the suites.
 */
const suites = readdirSync(new URL('.', import.meta.url))
  .filter((file) => file.endsWith('.bench.ts'))
  .map((file) => file.replace(/\.bench\.ts$/, ''))
  .sort();

const wanted = process.argv.slice(2).filter((arg) => !arg.startsWith('-'));
if (wanted.length === 0) {
  console.error(`usage: npm run bench -- <suite>…   suites: ${suites.join(', ') || '(none yet)'}`);
  process.exit(suites.length === 0 ? 0 : 2);
}
for (const suite of wanted) {
  if (!suites.includes(suite)) {
    console.error(`no bench suite "${suite}"; suites: ${suites.join(', ') || '(none yet)'}`);
    process.exit(2);
  }
  const module = (await import(`./${suite}.bench.ts`)) as { default: () => Promise<void> };
  await module.default();
}
