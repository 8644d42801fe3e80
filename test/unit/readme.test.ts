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
    expect([...Object.keys(envSchema.shape)].filter((name) => !documented.has(name))).toEqual([]);
    expect([...documented].filter((name) => !(name && name in envSchema.shape))).toEqual([]);
  });

  it('names only npm scripts that exist', () => {
    const commands = [...readme.matchAll(/^(?:npm [^#\n]*)/gm)].map((match) => match[0]);
    const named = new Set(
      commands.flatMap((line) => [...line.matchAll(/npm (?:run )?([a-z:]+)/g)].map((m) => m[1])),
    );
    for (const script of named) {
      if (script === 'ci' || script === 'run') continue;
      expect(packageJson.scripts, `npm script "${script}"`).toHaveProperty(script as string);
    }
  });
});
