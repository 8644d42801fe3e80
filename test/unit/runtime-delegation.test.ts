import { describe, expect, it } from 'vitest';
import type { RunLimits, RunView } from '../../libs/contracts/index.js';
import { childLimits, childOutcome } from '../../libs/runtime/index.js';

const OWN: RunLimits = {
  max_steps: 32,
  max_model_calls: 24,
  max_tool_calls: 64,
  reserve_model_calls: 2,
  reserve_tool_calls: 4,
  max_cost_micro_usd: null,
  cost_reserve_micro_usd: 0,
};

function parent(maxCost: number | null, spent: number): RunView {
  return {
    limits: { ...OWN, max_cost_micro_usd: maxCost, cost_reserve_micro_usd: 3_000_000 },
    usage: { steps: 0, model_calls: 0, tool_calls: 0, cost_micro_usd: spent },
  } as RunView;
}

describe("a delegated child's limits", () => {
  it('keeps its own counts and no cost limit under a parent without one', () => {
    expect(childLimits(parent(null, 5_000_000), OWN)).toEqual(OWN);
  });

  it('carves its cost limit from what the parent has left', () => {
    expect(childLimits(parent(30_000_000, 26_500_000), OWN)).toMatchObject({
      max_steps: 32,
      max_cost_micro_usd: 3_500_000,
      cost_reserve_micro_usd: 0,
    });
  });

  it('never takes more than its own cost limit, and nothing from a parent that has spent all', () => {
    const own = { ...OWN, max_cost_micro_usd: 1_000_000 };
    expect(childLimits(parent(30_000_000, 0), own).max_cost_micro_usd).toBe(1_000_000);
    expect(childLimits(parent(30_000_000, 31_000_000), own).max_cost_micro_usd).toBe(0);
  });
});

describe('the tool result a parent resumes with', () => {
  const base = { id: 'run_child', result: null, error: null } as unknown as RunView;

  it("is the child's answer when it succeeded", () => {
    expect(childOutcome({ ...base, status: 'succeeded', result: { answer: 'done' } })).toEqual({
      ok: true,
      result: { run_id: 'run_child', status: 'succeeded', answer: 'done' },
    });
  });

  it('names the reason when it failed or was cancelled', () => {
    const failed = childOutcome({
      ...base,
      status: 'failed',
      error: { code: 'deadline_exceeded', message: 'too slow', step: null },
    });
    expect(failed).toMatchObject({ ok: false, code: 'child_failed' });
    expect(!failed.ok && failed.message).toContain('deadline_exceeded');
    expect(childOutcome({ ...base, status: 'cancelled' })).toMatchObject({
      ok: false,
      code: 'child_cancelled',
    });
  });
});
