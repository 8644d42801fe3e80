import type { Config } from '../config/index.js';
import { type AgentDefinition, type RunLimits, runLimitsSchema, usdToMicroUsd } from '../contracts/index.js';
import { DELEGATE_TOOL_NAME } from './delegation.js';

/**
 * Which limits a run pins (DESIGN §7, ADR-0130 d1–d3). Ordinary runs take `run_defaults`; a run in a
 * session bound to a profile, whose pinned agent version carries `browser_task_limits`, takes those —
 * the overlay as it was when that version was made, so a changed file never changes an old session.
 */
export const BROWSER_TASK_LIMITS_KEY = 'browser_task_limits';

/** The browser tools a bound session always defines (ADR-0130 d4). */
export const BROWSER_TOOL_NAMES_REQUIRED = ['browser.navigate', 'browser.observe', 'browser.act'] as const;

/** `run_defaults` of ops/limits.yaml: ordinary runs, delegated children, custom agents. */
export function runDefaultLimits(limits: Config['limits']): RunLimits {
  const defaults = limits.run_defaults;
  return {
    max_steps: defaults.max_steps,
    max_model_calls: defaults.max_model_calls,
    max_tool_calls: defaults.max_tool_calls,
    reserve_model_calls: defaults.reserve_model_calls,
    reserve_tool_calls: defaults.reserve_tool_calls,
    max_cost_micro_usd: defaults.max_cost_usd === null ? null : usdToMicroUsd(defaults.max_cost_usd),
    cost_reserve_micro_usd: 0,
  };
}

/** The `browser_task` overlay: its counts and cost, with the answer reserves of `run_defaults` (d1). */
export function browserTaskLimits(limits: Config['limits']): RunLimits {
  const overlay = limits.browser_task;
  return {
    max_steps: overlay.max_steps,
    max_model_calls: overlay.max_model_calls,
    max_tool_calls: overlay.max_tool_calls,
    reserve_model_calls: limits.run_defaults.reserve_model_calls,
    reserve_tool_calls: limits.run_defaults.reserve_tool_calls,
    max_cost_micro_usd: usdToMicroUsd(overlay.max_cost_usd),
    cost_reserve_micro_usd: usdToMicroUsd(overlay.cost_reserve_usd),
  };
}

/**
 * The default agent the composition root gives each tenant (ADR-0130 d2): the configured default
 * model, the browser tools and the overlay in its metadata only when browser tools are enabled, so
 * the overlay is part of its content-addressed version. A chat-model variant (`model`) copies the
 * metadata, so a bound chat on another model keeps the budget.
 */
export function defaultAgentDefinition(
  config: Pick<Config, 'limits' | 'models'>,
  options: { browserTools: boolean; model?: string },
): AgentDefinition {
  return {
    model: options.model ?? config.models.default_model,
    instructions:
      'You carry out the task you are given. Use the tools to act; answer when the task is done or cannot be done.',
    tools: [...(options.browserTools ? BROWSER_TOOL_NAMES_REQUIRED : []), DELEGATE_TOOL_NAME],
    limits: {},
    metadata: options.browserTools ? { [BROWSER_TASK_LIMITS_KEY]: browserTaskLimits(config.limits) } : {},
  };
}

/**
 * The limits a new run pins (ADR-0130 d2): the overlay its pinned agent version carries when its
 * session is bound to a profile, otherwise `run_defaults` with the agent's own limits over them.
 */
export function selectRunLimits(
  limits: Config['limits'],
  session: { browser_profile_id: string | null },
  agent: Pick<AgentDefinition, 'limits' | 'metadata'>,
): RunLimits {
  const overlay = runLimitsSchema.safeParse(agent.metadata[BROWSER_TASK_LIMITS_KEY]);
  if (session.browser_profile_id && overlay.success) return overlay.data;
  const defaults = runDefaultLimits(limits);
  const own = agent.limits;
  const merged: RunLimits = {
    ...defaults,
    ...(own.max_steps !== undefined ? { max_steps: own.max_steps } : {}),
    ...(own.max_model_calls !== undefined ? { max_model_calls: own.max_model_calls } : {}),
    ...(own.max_tool_calls !== undefined ? { max_tool_calls: own.max_tool_calls } : {}),
    ...(own.max_cost_micro_usd !== undefined ? { max_cost_micro_usd: own.max_cost_micro_usd } : {}),
  };
  // A reserve stays strictly below its total (d3), even under an agent's smaller totals.
  merged.reserve_model_calls = Math.min(merged.reserve_model_calls, merged.max_model_calls - 1);
  merged.reserve_tool_calls = Math.min(merged.reserve_tool_calls, merged.max_tool_calls - 1);
  return runLimitsSchema.parse(merged);
}
