import { METRICS } from './catalogue.js';

/**
 * The README's catalogue of metrics, rendered from `METRICS`: one row per entry with
 * its name, kind, labels, the roles that serve it and its help. A unit test holds the README to it.
 */
export function catalogueTable(): string {
  const rows = Object.values(METRICS).map((entry) => {
    const labels = 'labelNames' in entry ? entry.labelNames.map((label) => `\`${label}\``).join(', ') : '—';
    const roles = entry.roles.length === 4 ? 'every role' : entry.roles.join(', ');
    return `| \`${entry.name}\` | ${entry.type} | ${labels} | ${roles} | ${entry.help.replaceAll('|', '\\|')} |`;
  });
  return [
    '| metric | type | labels | served by | what it counts |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}
