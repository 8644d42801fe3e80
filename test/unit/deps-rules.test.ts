import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';

const run = promisify(execFile);
const root = resolve(import.meta.dirname, '../..');
const depcruise = join(root, 'node_modules/.bin/depcruise');

/** A scratch tree with the repository's import rules and the given files; what `npm run deps` says of it. */
async function cruise(files: Record<string, string>): Promise<{ ok: boolean; output: string }> {
  const scratch = mkdtempSync(join(tmpdir(), 'lh-deps-'));
  scratches.push(scratch);
  cpSync(join(root, '.dependency-cruiser.cjs'), join(scratch, '.dependency-cruiser.cjs'));
  writeFileSync(join(scratch, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext' } }));
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(scratch, path)), { recursive: true });
    writeFileSync(join(scratch, path), text);
  }
  try {
    const { stdout } = await run(depcruise, ['libs', '--config', '.dependency-cruiser.cjs'], {
      cwd: scratch,
    });
    return { ok: true, output: stdout };
  } catch (error) {
    return { ok: false, output: String((error as { stdout?: string }).stdout ?? error) };
  }
}

const scratches: string[] = [];
afterAll(() => {
  for (const scratch of scratches) rmSync(scratch, { recursive: true, force: true });
});

describe('the import rules', () => {
  const store = { 'libs/store/records.ts': 'export const records = 1;\n' };

  it('fail on an import from a lower layer up to the store', async () => {
    for (const from of ['libs/lease/service.ts', 'libs/telemetry/metrics.ts']) {
      const upward = await cruise({
        ...store,
        [from]: "import { records } from '../store/records.js';\nexport { records };\n",
      });
      expect(upward.ok, upward.output).toBe(false);
      expect(upward.output).toMatch(/lease-not-up|side-libs-not-up/);
    }
  });

  it('pass the same import going down', async () => {
    const downward = await cruise({
      'libs/lease/ports.ts': 'export const port = 1;\n',
      'libs/store/records.ts': "import { port } from '../lease/ports.js';\nexport const records = port;\n",
    });
    expect(downward.ok, downward.output).toBe(true);
  });

  it("keep the run loop below its model adapters: the port is the loop's, an adapter imports it", async () => {
    const port = { 'libs/runtime/model.ts': 'export const port = 1;\n' };
    const upward = await cruise({
      ...port,
      'libs/models/scripted.ts': 'export const scripted = 1;\n',
      'libs/runtime/loop.ts': "import { scripted } from '../models/scripted.js';\nexport { scripted };\n",
    });
    expect(upward.ok, upward.output).toBe(false);
    expect(upward.output).toMatch(/run-loop-not-up/);
    const downward = await cruise({
      ...port,
      'libs/models/scripted.ts':
        "import { port } from '../runtime/model.js';\nexport const scripted = port;\n",
    });
    expect(downward.ok, downward.output).toBe(true);
  });
});
