import { describe, expect, it } from 'vitest';
import { systemChromiumPaths } from '../../libs/browser/index.js';

describe("the system's Chromium", () => {
  it('is its headless shell first for a headless launch, then the full browser', () => {
    const paths = systemChromiumPaths(true);
    expect(paths.slice(0, 2)).toEqual([
      '/usr/lib/chromium/chromium-headless-shell',
      '/usr/bin/chromium-headless-shell',
    ]);
    expect(paths).toContain('/usr/bin/chromium');
    expect(paths.indexOf('/usr/bin/chromium')).toBeGreaterThan(1);
  });

  it('is never the headless shell for a headed launch, which needs a window', () => {
    expect(systemChromiumPaths(false).some((path) => path.includes('headless-shell'))).toBe(false);
    expect(systemChromiumPaths(false)[0]).toBe('/usr/bin/chromium');
  });
});
