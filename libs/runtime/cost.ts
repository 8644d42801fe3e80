import { microUsdToUsd, type RunLimits, usdToMicroUsd } from '../contracts/index.js';
import type { ModelCallVerdict } from './limits.js';
import type { ModelUsage } from './model.js';

/**
 * The cost limit of a run (DESIGN §7, ADR-0130 d1, ADR-0078 d3). Money is integer micro-USD. A
 * price of P USD per million tokens is P micro-USD per token, so a price read exactly from its
 * decimal string as micro-USD per million tokens (P × 10^6) gives a call's cost exactly as
 * tokens × that ÷ 10^6, computed in bigint (the product passes 2^53) and rounded up once per call.
 */

/** A model's prices, each in micro-USD per million tokens, and its context window. */
export interface ModelPrice {
  inputMicroUsdPerMtok: number;
  cachedInputMicroUsdPerMtok: number;
  outputMicroUsdPerMtok: number;
  contextWindowTokens: number;
}

/** A model entry of ops/models.yaml: USD per million tokens as decimal strings. */
export interface ModelPriceConfig {
  input_usd_per_mtok: string;
  cached_input_usd_per_mtok: string;
  output_usd_per_mtok: string;
  context_window_tokens: number;
}

/** Output tokens a worst-case call is assumed to produce (ADR-0130 d1). */
export const WORST_CASE_OUTPUT_TOKENS = 8_192;

export type CostLimits = Pick<RunLimits, 'max_cost_micro_usd' | 'cost_reserve_micro_usd'>;

export type CostRecordVerdict = { ok: true } | { ok: false; reason: 'budget_exceeded'; detail: string };

/** Reads a model's prices exactly; a price that is not a plain decimal throws `RangeError`. */
export function modelPrice(config: ModelPriceConfig): ModelPrice {
  return {
    inputMicroUsdPerMtok: usdToMicroUsd(config.input_usd_per_mtok),
    cachedInputMicroUsdPerMtok: usdToMicroUsd(config.cached_input_usd_per_mtok),
    outputMicroUsdPerMtok: usdToMicroUsd(config.output_usd_per_mtok),
    contextWindowTokens: config.context_window_tokens,
  };
}

/** A model priced at zero, such as the local model: it has no effective cost limit (d1). */
export function isZeroPriced(price: ModelPrice): boolean {
  return (
    price.inputMicroUsdPerMtok === 0 &&
    price.cachedInputMicroUsdPerMtok === 0 &&
    price.outputMicroUsdPerMtok === 0
  );
}

/**
 * One call's cost, rounded up to a whole micro-USD. `inputTokens` counts all input, the cached part
 * included (the OpenAI convention; an adapter for a provider that reports them apart adds them up):
 * the cached part is priced at the cached rate, the rest at the uncached rate.
 */
export function callCostMicroUsd(price: ModelPrice, usage: ModelUsage): number {
  const { inputTokens, cachedInputTokens, outputTokens } = usage;
  for (const [what, tokens] of Object.entries({ inputTokens, cachedInputTokens, outputTokens }))
    if (!Number.isSafeInteger(tokens) || tokens < 0)
      throw new RangeError(`expected ${what} to be a whole number of tokens, got ${tokens}`);
  if (cachedInputTokens > inputTokens)
    throw new RangeError(`expected cached input (${cachedInputTokens}) within input (${inputTokens})`);
  return ceilMillionths(
    BigInt(inputTokens - cachedInputTokens) * BigInt(price.inputMicroUsdPerMtok) +
      BigInt(cachedInputTokens) * BigInt(price.cachedInputMicroUsdPerMtok) +
      BigInt(outputTokens) * BigInt(price.outputMicroUsdPerMtok),
  );
}

/**
 * The most one model attempt can cost: its whole context window at the uncached input price plus
 * its output cap — 8,192 tokens unless the model's entry says less, and the adapter always sends it
 * (about USD 3.05 on a 272,000-token window at USD 10 / USD 40 per million). Every attempt is checked
 * against the cost limit before it starts, so a run overshoots its limit by at most this (ADR-0130 d1).
 */
export function worstCaseCallMicroUsd(
  price: ModelPrice,
  outputCapTokens: number = WORST_CASE_OUTPUT_TOKENS,
): number {
  return callCostMicroUsd(price, {
    inputTokens: price.contextWindowTokens,
    cachedInputTokens: 0,
    outputTokens: Math.min(outputCapTokens, WORST_CASE_OUTPUT_TOKENS),
  });
}

/**
 * Before a model attempt: refused once the limit is reached; allowed to answer only once the
 * reserve or less remains. Shaped like `checkModelCall`'s verdict so the two combine: a call may
 * ask for tools only when both allow it.
 */
export function checkCostBeforeCall(
  limits: CostLimits,
  spentMicroUsd: number,
  price: ModelPrice,
): ModelCallVerdict {
  const max = effectiveLimit(limits, price);
  if (max === null) return { allowed: true, toolsAllowed: true };
  if (spentMicroUsd >= max)
    return {
      allowed: false,
      reason: 'budget_exceeded',
      detail: `the cost limit of USD ${microUsdToUsd(max)} is reached: USD ${microUsdToUsd(spentMicroUsd)} spent`,
    };
  return { allowed: true, toolsAllowed: !inCostReserve(limits, spentMicroUsd) };
}

/**
 * When a call's usage is recorded (`spentMicroUsd` includes it): the call that took the run past
 * its limit fails it `budget_exceeded`. Reaching the limit exactly is not crossing it.
 */
export function checkCostAfterCall(
  limits: CostLimits,
  spentMicroUsd: number,
  price: ModelPrice,
): CostRecordVerdict {
  const max = effectiveLimit(limits, price);
  if (max === null || spentMicroUsd <= max) return { ok: true };
  return {
    ok: false,
    reason: 'budget_exceeded',
    detail: `the cost limit of USD ${microUsdToUsd(max)} was crossed: USD ${microUsdToUsd(spentMicroUsd)} spent`,
  };
}

/**
 * The cost twin of `toolRequestRefused`, judged after the call's usage is recorded: a tool request
 * from the call that brought the run to its cost reserve, or from any later call, ends the run
 * `budget_exceeded` (ADR-0130 d1, ADR-0078).
 */
export function costToolRequestRefused(
  limits: CostLimits,
  spentMicroUsd: number,
  price: ModelPrice,
  toolCalls: number,
): boolean {
  if (toolCalls === 0 || effectiveLimit(limits, price) === null) return false;
  return inCostReserve(limits, spentMicroUsd);
}

/** The limit that binds this model, or null: none set, or a zero-priced model. */
function effectiveLimit(limits: CostLimits, price: ModelPrice): number | null {
  return limits.max_cost_micro_usd === null || isZeroPriced(price) ? null : limits.max_cost_micro_usd;
}

/** At or under the reserve remaining: the run may only answer. */
function inCostReserve(limits: CostLimits, spentMicroUsd: number): boolean {
  if (limits.max_cost_micro_usd === null) return false;
  return limits.max_cost_micro_usd - spentMicroUsd <= limits.cost_reserve_micro_usd;
}

/** ⌈value ÷ 10^6⌉ for a non-negative bigint, as a safe integer. */
function ceilMillionths(value: bigint): number {
  const million = 1_000_000n;
  const micro = (value + million - 1n) / million;
  if (micro > BigInt(Number.MAX_SAFE_INTEGER)) throw new RangeError('a call cost past 2^53 micro-USD');
  return Number(micro);
}
