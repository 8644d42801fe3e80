import type { Config } from '../config/index.js';
import type { RunLimits } from '../contracts/index.js';

/**
 * The limits a run pins when nothing else applies: `run_defaults` of ops/limits.yaml (DESIGN §7).
 * Top-level runs take them today (the browser-task overlay is ADR-0130's); delegated children
 * always keep them, with their cost carved from the parent (see `childLimits`).
 */
export function runDefaultLimits(limits: Config['limits']): RunLimits {
  const defaults = limits.run_defaults;
  return {
    max_steps: defaults.max_steps,
    max_model_calls: defaults.max_model_calls,
    max_tool_calls: defaults.max_tool_calls,
    reserve_model_calls: defaults.reserve_model_calls,
    reserve_tool_calls: defaults.reserve_tool_calls,
    max_cost_micro_usd:
      defaults.max_cost_usd === null ? null : Math.round(Number(defaults.max_cost_usd) * 1e6),
    cost_reserve_micro_usd: 0,
  };
}
