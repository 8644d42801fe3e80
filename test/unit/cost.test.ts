import { describe, expect, it } from 'vitest';
import type { RunLimits } from '../../libs/contracts/index.js';
import {
  callCostMicroUsd,
  checkCostAfterCall,
  checkCostBeforeCall,
  costToolRequestRefused,
  modelPrice,
  WORST_CASE_OUTPUT_TOKENS,
  worstCaseCallMicroUsd,
} from '../../libs/runtime/index.js';

/**
 * Prices as ops/models.yaml writes them. The ADR-0130 d1 figures (USD 3.05 on a 272,000-token window,
 * USD 10.33 on a 1,000,000-token window) both follow from USD 10 input and USD 40 output per million.
 */
const astra = modelPrice({
  input_usd_per_mtok: '10',
  cached_input_usd_per_mtok: '1',
  output_usd_per_mtok: '40',
  context_window_tokens: 272_000,
});
const fable = modelPrice({
  input_usd_per_mtok: '10',
  cached_input_usd_per_mtok: '1',
  output_usd_per_mtok: '40',
  context_window_tokens: 1_000_000,
});
const local = modelPrice({
  input_usd_per_mtok: '0',
  cached_input_usd_per_mtok: '0',
  output_usd_per_mtok: '0',
  context_window_tokens: 1_000_000,
});
const browserTask: Pick<RunLimits, 'max_cost_micro_usd' | 'cost_reserve_micro_usd'> = {
  max_cost_micro_usd: 30_000_000,
  cost_reserve_micro_usd: 3_000_000,
};
const noCostLimit = { max_cost_micro_usd: null, cost_reserve_micro_usd: 0 };
const usd = (amount: number) => Math.round(amount * 1_000_000);

describe('model call cost (ADR-0130 d1)', () => {
  it('reads decimal prices into exact micro-USD per million tokens', () => {
    expect(astra).toEqual({
      inputMicroUsdPerMtok: 10_000_000,
      cachedInputMicroUsdPerMtok: 1_000_000,
      outputMicroUsdPerMtok: 40_000_000,
      contextWindowTokens: 272_000,
    });
    expect(() => modelPrice({ ...pricesOf('1e-3'), context_window_tokens: 1 })).toThrow(RangeError);
  });

  it('prices cached input at its own rate and the rest of the input at the uncached rate', () => {
    // 20,000 input of which 18,000 cached, 800 output: 2,000 × 10 + 18,000 × 1 + 800 × 40 micro-USD.
    expect(
      callCostMicroUsd(astra, { inputTokens: 20_000, cachedInputTokens: 18_000, outputTokens: 800 }),
    ).toBe(20_000 + 18_000 + 32_000);
  });

  it('counts without float drift where floating point would not', () => {
    const price = modelPrice({ ...pricesOf('0.07'), context_window_tokens: 1_000_000 });
    expect(Math.ceil(100 * 0.07)).toBe(8); // the drift integers avoid: float rounding up a float error
    expect(callCostMicroUsd(price, { inputTokens: 100, cachedInputTokens: 0, outputTokens: 0 })).toBe(7);
    const costly = modelPrice({ ...pricesOf('9999999.999999'), context_window_tokens: 10_000_000 });
    // 1,000,001 × 9,999,999.999999 = 10,000,009,999,998.999999 micro-USD: past 2^53 before dividing.
    expect(callCostMicroUsd(costly, { inputTokens: 1_000_001, cachedInputTokens: 0, outputTokens: 0 })).toBe(
      10_000_009_999_999,
    );
  });

  it('rounds each call up to a whole micro-USD', () => {
    const cheap = modelPrice({ ...pricesOf('0.15'), context_window_tokens: 1000 });
    expect(callCostMicroUsd(cheap, { inputTokens: 1, cachedInputTokens: 0, outputTokens: 0 })).toBe(1);
    expect(callCostMicroUsd(cheap, { inputTokens: 20, cachedInputTokens: 0, outputTokens: 0 })).toBe(3);
    expect(callCostMicroUsd(local, { inputTokens: 500_000, cachedInputTokens: 0, outputTokens: 9_000 })).toBe(
      0,
    );
  });

  it('refuses usage whose cached input exceeds its input', () => {
    expect(() =>
      callCostMicroUsd(astra, { inputTokens: 10, cachedInputTokens: 11, outputTokens: 0 }),
    ).toThrow(RangeError);
  });

  it('bounds one call by its context window at the uncached price plus 8,192 output tokens', () => {
    expect(WORST_CASE_OUTPUT_TOKENS).toBe(8_192);
    expect(worstCaseCallMicroUsd(astra)).toBe(3_047_680); // "about USD 3.05"
    expect(worstCaseCallMicroUsd(fable)).toBe(10_327_680); // "about USD 10.33"
    expect(worstCaseCallMicroUsd(local)).toBe(0);
  });
});

describe('cost limit checks (ADR-0130 d1, ADR-0078 d3)', () => {
  it('lets a run without a cost limit call and ask for tools whatever it spent', () => {
    expect(checkCostBeforeCall(noCostLimit, usd(500), astra)).toEqual({ allowed: true, toolsAllowed: true });
    expect(checkCostAfterCall(noCostLimit, usd(500), astra)).toEqual({ ok: true });
    expect(costToolRequestRefused(noCostLimit, usd(500), astra, 3)).toBe(false);
  });

  it('lets a call ask for tools while more than the reserve remains, and only answer at or under it', () => {
    expect(checkCostBeforeCall(browserTask, usd(26.999999), astra)).toEqual({
      allowed: true,
      toolsAllowed: true,
    });
    expect(checkCostBeforeCall(browserTask, usd(27), astra)).toEqual({ allowed: true, toolsAllowed: false });
    expect(checkCostBeforeCall(browserTask, usd(29.999999), astra)).toEqual({
      allowed: true,
      toolsAllowed: false,
    });
  });

  it('refuses a model call once the limit is reached', () => {
    expect(checkCostBeforeCall(browserTask, usd(30), astra)).toMatchObject({
      allowed: false,
      reason: 'budget_exceeded',
    });
    expect(checkCostBeforeCall(browserTask, usd(31), astra)).toMatchObject({ allowed: false });
  });

  it('fails the run when recorded usage crosses the limit, and not when it only reaches it', () => {
    expect(checkCostAfterCall(browserTask, usd(30), astra)).toEqual({ ok: true });
    expect(checkCostAfterCall(browserTask, usd(30) + 1, astra)).toMatchObject({
      ok: false,
      reason: 'budget_exceeded',
    });
  });

  it('fails a tool request from the call that reached the reserve and from every later call', () => {
    // Started with USD 26.80 spent (tools allowed); its own cost took the run to USD 27.15.
    expect(checkCostBeforeCall(browserTask, usd(26.8), astra)).toEqual({ allowed: true, toolsAllowed: true });
    expect(costToolRequestRefused(browserTask, usd(27.15), astra, 1)).toBe(true);
    expect(costToolRequestRefused(browserTask, usd(27.15), astra, 0)).toBe(false);
    expect(costToolRequestRefused(browserTask, usd(28.5), astra, 2)).toBe(true);
    expect(costToolRequestRefused(browserTask, usd(26.9), astra, 2)).toBe(false);
  });

  it('gives a zero-priced model no effective cost limit, even with nothing left to carve', () => {
    const carvedToNothing = { max_cost_micro_usd: 0, cost_reserve_micro_usd: 0 };
    expect(checkCostBeforeCall(carvedToNothing, 0, local)).toEqual({ allowed: true, toolsAllowed: true });
    expect(checkCostBeforeCall(browserTask, usd(31), local)).toEqual({ allowed: true, toolsAllowed: true });
    expect(checkCostAfterCall(browserTask, usd(31), local)).toEqual({ ok: true });
    expect(costToolRequestRefused(browserTask, usd(29), local, 1)).toBe(false);
  });

  it('stops a bound run whose calls cross USD 30 after that one call, overshooting by at most that call', () => {
    const spentBefore = usd(26.99);
    expect(checkCostBeforeCall(browserTask, spentBefore, astra)).toEqual({
      allowed: true,
      toolsAllowed: true,
    });
    const spentAfter = spentBefore + worstCaseCallMicroUsd(astra); // USD 30.037680
    expect(checkCostAfterCall(browserTask, spentAfter, astra)).toEqual({
      ok: false,
      reason: 'budget_exceeded',
      detail: 'the cost limit of USD 30 was crossed: USD 30.03768 spent',
    });
    expect(spentAfter - 30_000_000).toBeLessThanOrEqual(worstCaseCallMicroUsd(astra));
  });

  it('ends a run of tool-asking calls at the call that reached the reserve, inside the limit', () => {
    let spent = 0;
    let calls = 0;
    for (;;) {
      const before = checkCostBeforeCall(browserTask, spent, astra);
      expect(before).toEqual({ allowed: true, toolsAllowed: true });
      spent += worstCaseCallMicroUsd(astra);
      calls += 1;
      expect(checkCostAfterCall(browserTask, spent, astra)).toEqual({ ok: true });
      if (costToolRequestRefused(browserTask, spent, astra, 1)) break;
    }
    expect(calls).toBe(9); // 9 × USD 3.04768 = USD 27.42912: USD 3 or less remains
    expect(spent).toBeLessThanOrEqual(30_000_000);
  });
});

function pricesOf(amount: string) {
  return { input_usd_per_mtok: amount, cached_input_usd_per_mtok: amount, output_usd_per_mtok: amount };
}
