/**
 * The count limits of a run (DESIGN §7, ADR-0130 d3): totals, and reserves kept for the final
 * answer. A reserve is strictly below its total (start-up refuses otherwise).
 */
export interface RunLimits {
  maxSteps: number;
  maxModelCalls: number;
  maxToolCalls: number;
  reserveModelCalls: number;
  reserveToolCalls: number;
}

export interface RunUsage {
  steps: number;
  modelCalls: number;
  toolCalls: number;
  /** Spent so far, in integer micro-USD (absent: nothing priced was recorded). */
  costMicroUsd?: number;
}

export type ModelCallVerdict =
  | { allowed: true; toolsAllowed: boolean }
  | { allowed: false; reason: 'budget_exceeded'; detail: string };

/**
 * Before a model call: whether it may happen, and whether it may ask for tools. A call that reaches
 * the model-call reserve (leaves only the reserve), or comes with the tool budget spent, may only answer.
 */
export function checkModelCall(limits: RunLimits, usage: RunUsage): ModelCallVerdict {
  if (usage.steps >= limits.maxSteps)
    return { allowed: false, reason: 'budget_exceeded', detail: `step limit ${limits.maxSteps} reached` };
  if (usage.modelCalls >= limits.maxModelCalls)
    return {
      allowed: false,
      reason: 'budget_exceeded',
      detail: `model-call limit ${limits.maxModelCalls} reached`,
    };
  const thisCall = usage.modelCalls + 1;
  // ADR-0130 d3: counted as the cost rule counts it — the call after which only the reserve is left
  // has reached it, so under 120 calls and a reserve of 2, call 118 may only answer (117 may act).
  const inModelReserve = limits.maxModelCalls - thisCall <= limits.reserveModelCalls;
  const toolsLeft = remainingToolCalls(limits, usage) > 0;
  const lastStep = usage.steps + 1 >= limits.maxSteps;
  return { allowed: true, toolsAllowed: !inModelReserve && toolsLeft && !lastStep };
}

/** Tool calls the run may still make before the tool-call reserve. */
export function remainingToolCalls(limits: RunLimits, usage: RunUsage): number {
  return Math.max(0, limits.maxToolCalls - limits.reserveToolCalls - usage.toolCalls);
}

/**
 * Fits a batch of tool calls to the remaining tool budget: the calls that fit run, the rest are
 * answered "not run" and the model gets to answer (ADR-0078).
 */
export function fitBatch<T>(
  limits: RunLimits,
  usage: RunUsage,
  calls: readonly T[],
): { run: T[]; skipped: T[] } {
  const room = remainingToolCalls(limits, usage);
  return { run: calls.slice(0, room), skipped: calls.slice(room) };
}

/** A response that asks for tools when it was told to answer only ends the run `budget_exceeded`. */
export function toolRequestRefused(verdict: ModelCallVerdict, toolCalls: number): boolean {
  return verdict.allowed && !verdict.toolsAllowed && toolCalls > 0;
}
