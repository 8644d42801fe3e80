import { defineConfig } from 'vitest/config';

/**
 * Tests that measure time against ADR bounds — the 50-run chaos test (a whole multi-process fleet
 * hurt) and the settle rules (300 ms quiet inside a 2 s bound) — run after the rest with
 * `vitest.solo.config.ts`: beside the other files' browsers their timings measured the machine's
 * load, not the fleet (each failed CI only under the full suite's load). There they run two at a
 * time, in this order (see the solo config): most of their time is a fault's wait, not CPU.
 */
export const SOLO_TESTS = [
  'test/chaos/fifty-runs.test.ts',
  // A frozen Redis must be told within 3 s on every role, five processes and a Chromium on two cores.
  'test/chaos/redis-freeze-processes.test.ts',
  // Held requests die with their lease: a crashed page, a close while an act settles and an expiry
  // sweep, then all watched together for 10 s. Beside two other files it once could not make the
  // next lease's context in time (acquire answered provider_unavailable) and lost the act's race.
  'test/security/fence-close.test.ts',
  // A SIGTERMed run worker must hand its runs back inside a 6 s and a 1.5 s shutdown bound: under
  // the full suite's load (two files beside it) it once passed the bound and exited 1.
  'test/chaos/shutdown-handoff.test.ts',
  // The same stop with a call in flight: the SIGTERMed worker must exit 0 inside its bound.
  'test/chaos/shutdown-inflight.test.ts',
  'test/chaos/hundred-runs-processes.test.ts',
  'test/browser/settle.test.ts',
];

/**
 * Files that hurt the process they run in — stop its Redis, capture its log lines, restart roles —
 * each in a process of its own: `redisLink` (libs/telemetry) is one per process, logs to the first
 * logger it is given and says "down" while any connection is, as one role's process has it.
 */
const OWN_PROCESS_TESTS = [
  'test/chaos/**/*.test.ts',
  // It stops Redis Cluster nodes under live connections: those reconnect for the rest of the
  // process, and the process's Redis link (one per process) would say "down" to every file after.
  'test/integration/redis-cluster.test.ts',
];

// One `vitest run` covers every other kind of test. Files run in forked processes, three at a time
// on a two-core machine: most files wait more than they compute (a fleet's intervals, a page's
// settle, a child process starting), and with two the cores stood idle about half the phase (this
// machine: 356 s with two forks, 265 s with three, every test passing; the files' summed time rose
// 8 %). The files whose timings measure the machine run in the solo config. Redis- and
// Chromium-backed files isolate themselves by key prefix and by launching their own browser.
//
// The other files share their fork's module cache (`isolate: false`): a fresh process a file spent
// about a second of CPU importing the fleet's modules again, CPU that the two-core machine's other
// file and its Chromium wanted (this run: 550 s → 377 s of CPU, 564 s → 524 s wall; test/unit alone
// 65 s → 39 s, test/integration 130 s → 90 s). A file still makes its own fleet, browser, Redis
// prefix and servers, and closes them.
export default defineConfig({
  test: {
    globalSetup: ['test/fixtures/page-script-setup.ts'],
    pool: 'forks',
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    teardownTimeout: 15_000,
    // What a poll waits for is the fleet's work done elsewhere (a webhook's delivery, a page's
    // re-read after an event): vitest's 1 s default measures the machine's load beside two files,
    // not the fleet. A bound that matters is given where it is asserted.
    expect: { poll: { timeout: 15_000 } },
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: ['**/node_modules/**', ...SOLO_TESTS, ...OWN_PROCESS_TESTS],
          isolate: false,
        },
      },
      {
        extends: true,
        test: {
          name: 'own-process',
          include: OWN_PROCESS_TESTS,
          exclude: ['**/node_modules/**', ...SOLO_TESTS],
        },
      },
    ],
  },
});
