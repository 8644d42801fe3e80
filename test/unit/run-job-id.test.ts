import { describe, expect, it } from 'vitest';
import { newId } from '../../libs/contracts/index.js';
import { runJobId, runJobSchema } from '../../queues/index.js';

describe('the runs queue contract', () => {
  it('builds one job id per run execution, with no colon and never all digits', () => {
    const runId = newId('run');
    const first = runJobId(runId, 1);
    expect(first).toBe(`${runId}-x1`);
    expect(runJobId(runId, 1)).toBe(first);
    expect(runJobId(runId, 2)).not.toBe(first);
    for (const id of [first, runJobId(runId, 2)]) {
      expect(id).not.toContain(':');
      expect(id).not.toMatch(/^\d+$/);
    }
  });

  it('refuses a run id that could break a job id or a Redis key', () => {
    expect(() => runJobId('run:1', 1)).toThrow();
    expect(() => runJobId('12345', 1)).toThrow();
    expect(() => runJobId(newId('run'), 0)).toThrow();
  });

  it('checks job data by its schema', () => {
    expect(
      runJobSchema.safeParse({ runId: newId('run'), execution: 1, enqueuedAtMs: Date.now() }).success,
    ).toBe(true);
    expect(runJobSchema.safeParse({ runId: newId('run'), execution: 1 }).success).toBe(false);
  });
});
