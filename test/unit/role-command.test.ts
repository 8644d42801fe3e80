import { mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { roleCommand } from '../fixtures/role-command.js';

const scratches: string[] = [];
afterAll(() => {
  for (const scratch of scratches) rmSync(scratch, { recursive: true, force: true });
});

/** A scratch repository whose files were last changed at the given times (seconds). */
function tree(files: Record<string, number>): string {
  const root = mkdtempSync(join(tmpdir(), 'lh-role-command-'));
  scratches.push(root);
  for (const [path, atS] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true });
    writeFileSync(join(root, path), '');
    utimesSync(join(root, path), atS, atS);
  }
  return root;
}

describe('a role started by the tests', () => {
  const entry = 'apps/sweeper/main.ts';

  it('runs compiled when the build is newer than every source it is built from', () => {
    const root = tree({
      'apps/sweeper/main.ts': 100,
      'libs/store/lua/x-1.lua': 100,
      'dist/apps/sweeper/main.js': 200,
    });
    expect(roleCommand(entry, root)).toEqual([join(root, 'dist/apps/sweeper/main.js')]);
  });

  it('runs its sources under tsx when any source changed after the build, a script or a file the build copies', () => {
    for (const changed of ['libs/runtime/loop.ts', 'libs/store/lua/x-1.lua', 'ops/limits.yaml']) {
      const root = tree({ 'apps/sweeper/main.ts': 100, [changed]: 300, 'dist/apps/sweeper/main.js': 200 });
      expect(roleCommand(entry, root), changed).toEqual(['--import', 'tsx', entry]);
    }
  });

  it('runs its sources when there is no build, and takes no generated bundle for a source', () => {
    expect(roleCommand(entry, tree({ 'apps/sweeper/main.ts': 100 }))).toEqual(['--import', 'tsx', entry]);
    const root = tree({
      'apps/sweeper/main.ts': 100,
      'libs/browser/page-script/page-agent.bundle.js': 300,
      'dist/apps/sweeper/main.js': 200,
    });
    expect(roleCommand(entry, root)).toEqual([join(root, 'dist/apps/sweeper/main.js')]);
  });
});
