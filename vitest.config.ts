import { defineConfig } from 'vitest/config';

// One `vitest run` covers every kind of test. Files run in forked processes, two at a time on
// this two-core machine; Redis- and Chromium-backed files isolate themselves by key prefix and
// by launching their own browser.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 15_000,
  },
});
