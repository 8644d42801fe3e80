import { defineConfig } from 'vitest/config';
import { SOLO_TESTS } from './vitest.config.js';

/** The tests that run alone, after the rest (`npm test` runs both; see vitest.config.ts). */
export default defineConfig({
  test: {
    include: SOLO_TESTS,
    globalSetup: ['test/fixtures/page-script-setup.ts'],
    pool: 'forks',
    maxWorkers: 1,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 15_000,
    expect: { poll: { timeout: 15_000 } },
  },
});
