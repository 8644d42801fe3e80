import { describe, expect, it } from 'vitest';
import { checkModelCall, fitBatch, toolRequestRefused } from '../../libs/runtime/index.js';
import { TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

const defaults = TEST_LOOP_LIMITS;
const usage = (modelCalls: number, toolCalls = 0, steps = modelCalls) => ({ modelCalls, toolCalls, steps });

describe('run count limits (run_defaults)', () => {
  it('lets a call ask for tools until the model-call reserve', () => {
    expect(checkModelCall(defaults, usage(20))).toEqual({ allowed: true, toolsAllowed: true });
    // The 22nd call leaves only the reserve of 2: it reaches the reserve and may only answer (ADR-0130 d3).
    expect(checkModelCall(defaults, usage(21))).toEqual({ allowed: true, toolsAllowed: false });
    expect(checkModelCall(defaults, usage(22))).toEqual({ allowed: true, toolsAllowed: false });
    expect(checkModelCall(defaults, usage(23))).toEqual({ allowed: true, toolsAllowed: false });
    expect(checkModelCall(defaults, usage(24))).toMatchObject({ allowed: false, reason: 'budget_exceeded' });
  });

  it('ends the run when a call inside the reserve still asks for a tool', () => {
    expect(toolRequestRefused(checkModelCall(defaults, usage(22)), 1)).toBe(true);
    expect(toolRequestRefused(checkModelCall(defaults, usage(22)), 0)).toBe(false);
    expect(toolRequestRefused(checkModelCall(defaults, usage(5)), 3)).toBe(false);
  });

  it('fits a batch to the tool calls left before the reserve, and a run out of tool calls still answers', () => {
    expect(fitBatch(defaults, usage(3, 58), ['a', 'b', 'c', 'd'])).toEqual({
      run: ['a', 'b'],
      skipped: ['c', 'd'],
    });
    expect(fitBatch(defaults, usage(3, 60), ['a'])).toEqual({ run: [], skipped: ['a'] });
    expect(checkModelCall(defaults, usage(3, 60))).toEqual({ allowed: true, toolsAllowed: false });
  });

  it('stops at the step limit, leaving the last step to answer', () => {
    expect(checkModelCall(defaults, usage(10, 0, 31))).toEqual({ allowed: true, toolsAllowed: false });
    expect(checkModelCall(defaults, usage(10, 0, 32))).toMatchObject({
      allowed: false,
      detail: 'step limit 32 reached',
    });
  });
});
