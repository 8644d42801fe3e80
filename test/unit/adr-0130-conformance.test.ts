import { describe, expect, it } from 'vitest';
import { loadLimitsFile } from '../../libs/config/ops-files.js';
import { checkModelCall, type RunLimits, toolRequestRefused } from '../../libs/runtime/index.js';

/** The browser-task limits exactly as ops/limits.yaml gives them (the model-call reserve from run_defaults). */
function browserTaskLimits(): RunLimits {
  const file = loadLimitsFile('ops');
  return {
    maxSteps: file.browser_task.max_steps,
    maxModelCalls: file.browser_task.max_model_calls,
    maxToolCalls: file.browser_task.max_tool_calls,
    reserveModelCalls: file.run_defaults.reserve_model_calls,
    reserveToolCalls: file.run_defaults.reserve_tool_calls,
  };
}

describe('ADR-0130 d3: the call that reaches the model-call reserve may only answer', () => {
  it('lets at most 117 of the 120 browser-task calls act: call 117 may ask for tools, call 118 may not', () => {
    const limits = browserTaskLimits();
    expect([limits.maxModelCalls, limits.reserveModelCalls]).toEqual([120, 2]);
    const usageBefore = (call: number) => ({ steps: call - 1, modelCalls: call - 1, toolCalls: 0 });

    expect(checkModelCall(limits, usageBefore(117))).toEqual({ allowed: true, toolsAllowed: true });
    // After call 118, two calls are left: it reaches the reserve, as the cost rule counts it.
    expect(checkModelCall(limits, usageBefore(118))).toEqual({ allowed: true, toolsAllowed: false });
    expect(toolRequestRefused(checkModelCall(limits, usageBefore(118)), 1)).toBe(true);

    const acting = Array.from({ length: 120 }, (_, index) => index + 1).filter(
      (call) =>
        checkModelCall(limits, usageBefore(call)).allowed &&
        !toolRequestRefused(checkModelCall(limits, usageBefore(call)), 1),
    );
    expect(acting).toHaveLength(117);
    expect(acting.at(-1)).toBe(117);
  });
});
