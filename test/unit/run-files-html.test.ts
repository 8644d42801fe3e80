import { describe, expect, it } from 'vitest';
import type { RunFile } from '../../libs/contracts/index.js';
import { filesSection } from '../../libs/ui/run-files.js';

const HOSTILE = '<img src=x onerror=alert(1)>"\'.csv';

const stored: RunFile = {
  id: 'fil_0123456789abcdefghjk',
  name: HOSTILE,
  content_type: 'text/csv',
  size_bytes: 2048,
  sha256: 'a'.repeat(64),
  state: 'stored',
  reason: null,
  created_at_ms: 1,
};

describe("the run page's files section", () => {
  it('links each kept file to its attachment route with its type, size and SHA-256, the name escaped', () => {
    const section = String(filesSection('run_abcd1234', [stored]));
    expect(section).toContain('href="/v1/runs/run_abcd1234/files/fil_0123456789abcdefghjk"');
    expect(section).toContain('text/csv, 2.0 KiB');
    expect(section).toContain('a'.repeat(64));
    expect(section).not.toContain('<img');
    expect(section).toContain('&lt;img');
  });

  it('says why a cancelled download was not kept, and links nothing for it', () => {
    const section = String(
      filesSection('run_abcd1234', [
        { ...stored, name: 'archive.bin', state: 'cancelled', reason: 'too_large', sha256: null },
      ]),
    );
    expect(section).toContain('larger than the per-file limit');
    expect(section).not.toContain('href=');
  });

  it('is absent when the run downloaded nothing', () => {
    expect(filesSection('run_abcd1234', [])).toBe('');
  });
});
