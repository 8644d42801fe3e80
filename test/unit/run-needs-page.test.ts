import { describe, expect, it } from 'vitest';
import { RUN_STATUSES, runNeedsPage } from '../../libs/contracts/index.js';

describe('which runs need their page (ADR-0127 d4)', () => {
  it('keeps the page of a run running, queued to resume, or parked on its own approval', () => {
    expect(RUN_STATUSES.filter((status) => runNeedsPage(status))).toEqual(['queued', 'running', 'parked']);
  });

  it('lets go of the page of a run waiting away from it, ended, or gone', () => {
    for (const status of ['waiting_child', 'waiting_user', 'succeeded', 'failed', 'cancelled'] as const)
      expect(runNeedsPage(status)).toBe(false);
    expect(runNeedsPage(undefined)).toBe(false);
  });
});
