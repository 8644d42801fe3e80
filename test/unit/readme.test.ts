import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../libs/config/env.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const packageJson = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as {
  scripts: Record<string, string>;
};

describe('the README', () => {
  it('documents every setting the configuration reads', () => {
    const documented = new Set([...readme.matchAll(/^\| `([A-Z0-9_]+)` *\|/gm)].map((match) => match[1]));
    // Never vacuous: the settings table is found, with the first setting a reader needs.
    expect(documented.has('REDIS_URL')).toBe(true);
    expect([...Object.keys(envSchema.shape)].filter((name) => !documented.has(name))).toEqual([]);
    expect([...documented].filter((name) => !(name && name in envSchema.shape))).toEqual([]);
  });

  it('names only npm scripts that exist', () => {
    const commands = [...readme.matchAll(/^(?:npm [^#\n]*)/gm)].map((match) => match[0]);
    const named = new Set(
      commands.flatMap((line) =>
        [...line.matchAll(/npm (?:run )?([a-z][a-z0-9:-]*)/g)].flatMap((m) => (m[1] ? [m[1]] : [])),
      ),
    );
    named.delete('ci');
    // The check must have something to check: a pattern that stops matching would pass on nothing.
    // These are the commands a reader starts with; each is a script (`npm test`, `npm start` included).
    for (const essential of ['setup', 'start', 'test', 'api-key', 'bench'])
      expect([...named], `the README names "npm ${essential}"`).toContain(essential);
    for (const script of named) expect(packageJson.scripts, `npm script "${script}"`).toHaveProperty(script);
  });
});
