import type { Config } from '../config/index.js';
import {
  type AgentDefinition,
  type RunLimits,
  runLimitsSchema,
  type ScheduleLimits,
  usdToMicroUsd,
} from '../contracts/index.js';
import { browserTaskLimits, selectRunLimits } from '../runtime/run-limits.js';

/**
 * Why a schedule's own limits may not be used, or undefined. ADR-0130 d3 lets schedules keep their
 * own limits; none may pass the browser-task overlay, the most any run is given.
 */
export function scheduleLimitsProblem(
  limits: Config['limits'],
  own: ScheduleLimits | undefined,
): string | undefined {
  if (!own) return undefined;
  const overlay = browserTaskLimits(limits);
  const counts = ['max_steps', 'max_model_calls', 'max_tool_calls'] as const;
  for (const name of counts) {
    const value = own[name];
    if (value !== undefined && value > overlay[name])
      return `run.limits.${name}: at most ${overlay[name]} (the browser-task limit), got ${value}`;
  }
  if (own.max_cost_usd !== undefined && usdToMicroUsd(own.max_cost_usd) > (overlay.max_cost_micro_usd ?? 0))
    return `run.limits.max_cost_usd: at most ${limits.browser_task.max_cost_usd} (the browser-task limit), got ${own.max_cost_usd}`;
  return undefined;
}

/**
 * The limits a fired run pins: what a run of its session would get (ADR-0130 d2), with each of the
 * schedule's own limits in its place; each reserve stays strictly below its total (d3).
 */
export function scheduleRunLimits(
  limits: Config['limits'],
  session: { browser_profile_id: string | null },
  agent: Pick<AgentDefinition, 'limits' | 'metadata'>,
  own: ScheduleLimits | undefined,
): RunLimits {
  const base = selectRunLimits(limits, session, agent);
  if (!own) return base;
  const merged: RunLimits = {
    ...base,
    ...(own.max_steps !== undefined ? { max_steps: own.max_steps } : {}),
    ...(own.max_model_calls !== undefined ? { max_model_calls: own.max_model_calls } : {}),
    ...(own.max_tool_calls !== undefined ? { max_tool_calls: own.max_tool_calls } : {}),
    ...(own.max_cost_usd !== undefined ? { max_cost_micro_usd: usdToMicroUsd(own.max_cost_usd) } : {}),
  };
  merged.reserve_model_calls = Math.min(merged.reserve_model_calls, merged.max_model_calls - 1);
  merged.reserve_tool_calls = Math.min(merged.reserve_tool_calls, merged.max_tool_calls - 1);
  if (merged.max_cost_micro_usd !== null)
    merged.cost_reserve_micro_usd = Math.min(
      merged.cost_reserve_micro_usd,
      Math.max(0, merged.max_cost_micro_usd - 1),
    );
  return runLimitsSchema.parse(merged);
}
