import { mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import {
  bundlePageAgent,
  PAGE_AGENT_BUNDLE_FILE,
  readPageAgentScript,
  writePageAgentBundle,
} from '../../libs/browser/page-script/bundle.js';
import { PAGE_AGENT_GLOBAL } from '../../libs/browser/page-script/page-agent-global.js';

const SOURCES = fileURLToPath(new URL('../../libs/browser/page-script/', import.meta.url));

describe('the page script, bundled at build time and loaded as a file', () => {
  const made: string[] = [];
  const scratch = async () => {
    const dir = await mkdtemp(join(tmpdir(), 'page-script-'));
    made.push(dir);
    return dir;
  };
  afterAll(async () => {
    for (const dir of made) await rm(dir, { recursive: true, force: true });
  });

  it('writes the bundle the build ships: one script that installs the page agent', async () => {
    const dir = await scratch();
    await writePageAgentBundle(dir);
    const script = await readFile(join(dir, PAGE_AGENT_BUNDLE_FILE), 'utf8');
    expect(script).toContain(PAGE_AGENT_GLOBAL);
    expect(script).toBe(await bundlePageAgent(SOURCES));
  });

  it('loads a built file with no sources beside it (a build) without bundling', async () => {
    const dir = await scratch();
    await writeFile(join(dir, PAGE_AGENT_BUNDLE_FILE), '/* built */');
    expect(await readPageAgentScript(dir)).toBe('/* built */');
  });

  it('loads the built file when it is newer than every source beside it', async () => {
    const dir = await scratch();
    await writeFile(join(dir, 'page-agent.ts'), 'export {};');
    await utimes(join(dir, 'page-agent.ts'), new Date(1_000_000), new Date(1_000_000));
    await writeFile(join(dir, PAGE_AGENT_BUNDLE_FILE), '/* fresh */');
    expect(await readPageAgentScript(dir)).toBe('/* fresh */');
  });

  it('bundles from the sources in development when the file is missing or older than a source', async () => {
    expect(await readPageAgentScript(await scratch(), SOURCES)).toContain(PAGE_AGENT_GLOBAL);
    const dir = await scratch();
    await writeFile(join(dir, PAGE_AGENT_BUNDLE_FILE), '/* stale */');
    await utimes(join(dir, PAGE_AGENT_BUNDLE_FILE), new Date(1_000_000), new Date(1_000_000));
    expect(await readPageAgentScript(dir, SOURCES)).toContain(PAGE_AGENT_GLOBAL);
  });
});
