import { afterEach, describe, expect, it } from 'vitest';
import { OpenAiCompatibleModel, type OpenAiCompatibleModelOptions } from '../../libs/models/index.js';
import {
  modelPrice,
  type RunLimits,
  runExecution,
  WORST_CASE_OUTPUT_TOKENS,
  worstCaseCallMicroUsd,
} from '../../libs/runtime/index.js';
import { MemoryRun } from '../fixtures/memory-run.js';
import { type ModelServer, type PolicyReply, startModelServer } from '../fixtures/model-server.js';

/**
 * ADR-0130 d1 against a local chat-completions server: every model attempt is checked against the
 * cost limit before it starts (the adapter's own retries too), every attempt is capped at 8,192
 * output tokens or less, so one attempt's worst case — what GET /v1/models shows — bounds the overshoot.
 */

const USD = 1_000_000;
/** USD 10 input, USD 1 cached input, USD 40 output per million tokens; a 272,000-token window. */
const price = modelPrice({
  input_usd_per_mtok: '10',
  cached_input_usd_per_mtok: '1',
  output_usd_per_mtok: '40',
  context_window_tokens: 272_000,
});
const limits: RunLimits = {
  maxSteps: 160,
  maxModelCalls: 120,
  maxToolCalls: 160,
  reserveModelCalls: 2,
  reserveToolCalls: 4,
};
const costLimits = { max_cost_micro_usd: 30 * USD, cost_reserve_micro_usd: 3 * USD };

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function modelFor(target: ModelServer, options: Partial<OpenAiCompatibleModelOptions> = {}) {
  return new OpenAiCompatibleModel({
    name: 'astra',
    model: 'played-model',
    baseUrl: target.baseUrl,
    apiKey: target.apiKey,
    attempts: 5,
    backoff: { baseMs: 1, maxMs: 2 },
    sleep: async () => {},
    ...options,
  });
}

/** A billed attempt whose output cannot be used (its tool arguments are not JSON): the adapter retries it. */
const billedGarbage = (promptTokens: number): PolicyReply => ({
  tool_calls: [{ name: 'browser__observe', arguments: '{not json' }],
  usage: { prompt_tokens: promptTokens, completion_tokens: 0 },
});

function runWith(run: MemoryRun, model: OpenAiCompatibleModel) {
  return runExecution({
    run,
    model,
    tools: { definitions: () => [], execute: async () => ({ ok: true, result: null }) },
    policy: { needsApproval: async () => false, park: async () => 'apr_x' },
    limits,
    deadlineMs: Date.now() + 30_000,
    signal: new AbortController().signal,
    price,
    costLimits,
  });
}

describe('ADR-0130 d1: cost per attempt', () => {
  it('never starts a retry once the billed attempts of the same call reached the cost limit', async () => {
    // USD 12 billed by an unusable answer, then an answer the run would happily take.
    server = await startModelServer({ policy: [billedGarbage(1_200_000), { content: 'done' }] });
    const run = new MemoryRun('run_attempts');
    run.usageNow.costMicroUsd = 20 * USD;

    const end = await runWith(run, modelFor(server));

    expect(end).toMatchObject({ kind: 'failed', code: 'budget_exceeded' });
    // One attempt reached the server: the second was checked against the limit and never sent.
    expect(server.requests).toHaveLength(1);
    // The billed attempt is charged: USD 32, past USD 30 by one attempt, within one worst case.
    expect(run.usageNow.costMicroUsd).toBe(32 * USD);
    expect(run.usageNow.costMicroUsd - 30 * USD).toBeLessThanOrEqual(worstCaseCallMicroUsd(price));
  });

  it('charges every billed retry of one call, and retries while the limit still has room', async () => {
    server = await startModelServer({
      policy: [
        billedGarbage(100_000),
        billedGarbage(100_000),
        { content: 'done', usage: { prompt_tokens: 100_000, completion_tokens: 0 } },
      ],
    });
    const run = new MemoryRun('run_billed');

    const end = await runWith(run, modelFor(server));

    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });
    expect(server.requests).toHaveLength(3);
    // Three attempts of USD 1 each, all on the one call.
    expect(run.usageNow).toMatchObject({ modelCalls: 1, costMicroUsd: 3 * USD });
  });

  it('fails budget_exceeded, not model_error, when a failed call’s billed attempts crossed the limit', async () => {
    server = await startModelServer({ policy: [billedGarbage(1_200_000)] });
    const run = new MemoryRun('run_failed_billed');
    run.usageNow.costMicroUsd = 20 * USD;

    // One attempt only: its unusable, billed answer fails the call, and its USD 12 cross the limit.
    const end = await runWith(run, modelFor(server, { attempts: 1 }));

    expect(end).toEqual({
      kind: 'failed',
      code: 'budget_exceeded',
      detail: 'the cost limit of USD 30 was crossed: USD 32 spent',
      step: 1,
    });
    expect(run.usageNow.costMicroUsd).toBe(32 * USD);
  });

  it("always sends an output cap: 8,192 tokens unless the model's entry says less", async () => {
    server = await startModelServer({ policy: () => ({ content: 'ok' }) });
    await modelFor(server).call(
      { transcript: [{ kind: 'input', text: 'hi' }], tools: [] },
      { deadlineMs: Date.now() + 10_000 },
    );
    await modelFor(server, { maxOutputTokens: 1_024 }).call(
      { transcript: [{ kind: 'input', text: 'hi' }], tools: [] },
      { deadlineMs: Date.now() + 10_000 },
    );
    expect(server.requests.map((request) => request.body.max_completion_tokens)).toEqual([
      WORST_CASE_OUTPUT_TOKENS,
      1_024,
    ]);
  });

  it('refuses at start-up an output cap above the 8,192 tokens the worst case is priced at', async () => {
    server = await startModelServer({ policy: () => ({ content: 'ok' }) });
    const target = server;
    expect(() => modelFor(target, { maxOutputTokens: 8_193 })).toThrow(/maxOutputTokens/);
  });

  it("prices the worst-case call at the model's own output cap when it is below 8,192", () => {
    expect(worstCaseCallMicroUsd(price)).toBe(3_047_680);
    // 272,000 × USD 10 + 1,024 × USD 40 per million tokens.
    expect(worstCaseCallMicroUsd(price, 1_024)).toBe(2_760_960);
  });
});
