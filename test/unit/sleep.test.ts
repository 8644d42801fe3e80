import { describe, expect, it } from 'vitest';
import { sleepMs } from '../../libs/browser/operation.js';

describe('sleepMs', () => {
  it('never ends before its time has passed on the wall clock the callers measure with', async () => {
    // Node may fire a timer a millisecond before Date.now() says its time has come; the polls
    // that space their reads with this sleep (at least 250 ms apart) would then read once too often.
    const short: number[] = [];
    for (let i = 0; i < 200; i += 1) {
      const startedAtMs = Date.now();
      await sleepMs(5);
      const sleptMs = Date.now() - startedAtMs;
      if (sleptMs < 5) short.push(sleptMs);
    }
    expect(short).toEqual([]);
  });

  it('ends at once when its signal is aborted', async () => {
    const controller = new AbortController();
    const startedAtMs = Date.now();
    const slept = sleepMs(10_000, controller.signal);
    controller.abort();
    await slept;
    expect(Date.now() - startedAtMs).toBeLessThan(1_000);
  });
});
