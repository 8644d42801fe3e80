import { defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { SOLO_TESTS } from './vitest.config.js';

/**
 * The solo tests in the order SOLO_TESTS gives, not vitest's (largest or slowest first): two forks
 * take them in turn, so the order decides which run side by side. The fifty-run fleet starts beside
 * the shorter files and the hundred-run fleet takes its fork after it, never beside it: side by side
 * the two fleets' processes starved each other, and the fifty-run test missed its bounds in 3 of 8
 * runs. The settle rules, the most sensitive to load, come last.
 */
class SoloOrder extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rank = (file: TestSpecification) => SOLO_TESTS.findIndex((path) => file.moduleId.endsWith(path));
    return [...files].sort((a, b) => rank(a) - rank(b));
  }
}

/** The tests that run after the rest (`npm test` runs both; see vitest.config.ts), two at a time. */
export default defineConfig({
  test: {
    include: SOLO_TESTS,
    globalSetup: ['test/fixtures/page-script-setup.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 15_000,
    expect: { poll: { timeout: 15_000 } },
    sequence: { sequencer: SoloOrder },
  },
});
