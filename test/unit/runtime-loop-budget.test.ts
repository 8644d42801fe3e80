import { describe, expect, it } from 'vitest';
import { ScriptedModel, scriptSchema } from '../../libs/models/index.js';
import {
  LoopBreaker,
  type Model,
  type ModelRequest,
  type ModelResponse,
  modelPrice,
  type RunLimits,
  runExecution,
  type ToolCall,
  type ToolExecutor,
  type ToolOutcome,
} from '../../libs/runtime/index.js';
import { MemoryRun } from '../fixtures/memory-run.js';

const limits: RunLimits = {
  maxSteps: 160,
  maxModelCalls: 120,
  maxToolCalls: 160,
  reserveModelCalls: 2,
  reserveToolCalls: 4,
};
/** USD 10 input, USD 1 cached input, USD 40 output per million tokens; a 272,000-token window. */
const price = modelPrice({
  input_usd_per_mtok: '10',
  cached_input_usd_per_mtok: '1',
  output_usd_per_mtok: '40',
  context_window_tokens: 272_000,
});
const USD = 1_000_000;

/** A model that observes forever, each call costing `inputTokens` uncached input tokens. */
class ObservingModel implements Model {
  readonly name = 'observing';
  requests: ModelRequest[] = [];
  constructor(private readonly inputTokens: number) {}
  async call(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(request);
    const turn = request.transcript.filter((entry) => entry.kind === 'model').length;
    const usage = { inputTokens: this.inputTokens, cachedInputTokens: 0, outputTokens: 0 };
    if (request.tools.length === 0) return { toolCalls: [], answer: 'stopped', usage };
    return { toolCalls: [{ id: `c${turn}`, name: 'browser.observe', args: {} }], usage };
  }
}

/** Observes a page whose content changes on every call when `changing`, and hands out its evidence. */
class PageTools implements ToolExecutor {
  sent = 0;
  onSend: ((sent: number) => void) | undefined;
  #evidence: string | null = null;
  constructor(private readonly changing: boolean) {}
  definitions() {
    return ['browser.navigate', 'browser.observe', 'browser.act'].map((name) => ({
      name,
      description: name,
      parameters: {},
    }));
  }
  async execute(_call: ToolCall, context: { beforeDispatch: () => Promise<void> }): Promise<ToolOutcome> {
    await context.beforeDispatch();
    this.sent += 1;
    this.onSend?.(this.sent);
    this.#evidence = this.changing ? `page-${this.sent}` : 'page-same';
    return { ok: true, result: { observation: { revision: `r${this.sent}`, elements: [] } } };
  }
  takeEvidenceKey() {
    const key = this.#evidence;
    this.#evidence = null;
    return key;
  }
}

const noApprovals = { needsApproval: async () => false, park: async () => 'apr_x' };

function execute(
  run: MemoryRun,
  model: Model,
  tools: ToolExecutor,
  overrides: Partial<Parameters<typeof runExecution>[0]> = {},
) {
  return runExecution({
    run,
    model,
    tools,
    policy: noApprovals,
    limits,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
    ...overrides,
  });
}

describe('the cost limit (ADR-0130 d1)', () => {
  const cost = { max_cost_micro_usd: 30 * USD, cost_reserve_micro_usd: 3 * USD };

  it('fails budget_exceeded after the one call that crosses the limit, and records that call', async () => {
    const run = new MemoryRun('run_budget', 'work');
    run.usageNow.costMicroUsd = 20 * USD;
    // USD 15 in one call: allowed before it (USD 10 left, above the reserve), USD 35 after it.
    const end = await execute(run, new ObservingModel(1_500_000), new PageTools(true), {
      price,
      costLimits: cost,
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'budget_exceeded' });
    expect(run.usageNow).toMatchObject({ modelCalls: 1, costMicroUsd: 35 * USD });
  });

  it('fails budget_exceeded when the call that crosses the limit only answers: the answer is not the end', async () => {
    const run = new MemoryRun('run_budget', 'work');
    run.usageNow.costMicroUsd = 28 * USD;
    // Inside the reserve, so the call may only answer; its USD 15 take the run to USD 43.
    const model = new ObservingModel(1_500_000);
    const end = await execute(run, model, new PageTools(true), { price, costLimits: cost });
    expect(model.requests[0]?.tools).toEqual([]);
    expect(end).toEqual({
      kind: 'failed',
      code: 'budget_exceeded',
      detail: 'the cost limit of USD 30 was crossed: USD 43 spent',
      step: 1,
    });
    expect(run.usageNow).toMatchObject({ modelCalls: 1, costMicroUsd: 43 * USD });
  });

  it('refuses the next call once the limit is spent', async () => {
    const run = new MemoryRun('run_budget', 'work');
    run.usageNow.costMicroUsd = 30 * USD;
    const model = new ObservingModel(1);
    const end = await execute(run, model, new PageTools(true), { price, costLimits: cost });
    expect(end).toMatchObject({ kind: 'failed', code: 'budget_exceeded' });
    expect(model.requests).toHaveLength(0);
  });

  it('lets a run at or under the reserve only answer: tools are not offered', async () => {
    const run = new MemoryRun('run_budget', 'work');
    run.usageNow.costMicroUsd = 27 * USD;
    const model = new ObservingModel(1_000);
    const end = await execute(run, model, new PageTools(true), { price, costLimits: cost });
    expect(model.requests[0]?.tools).toEqual([]);
    expect(end).toEqual({ kind: 'succeeded', answer: 'stopped' });
  });

  it('fails a script that outlasts its tool budget budget_exceeded: its answer would claim steps it never took', async () => {
    const run = new MemoryRun('run_script_budget', 'work');
    const script = scriptSchema.parse({
      steps: [1, 2, 3].map((page) => ({ tool: 'browser.navigate', url: `https://shop.test/${page}` })),
      answer: 'visited all three pages',
    });
    const tools = new PageTools(true);
    // Two tool calls before the reserve of four: the third step meets an answer-only turn.
    const end = await execute(run, new ScriptedModel(script), tools, {
      limits: { ...limits, maxToolCalls: 6, reserveToolCalls: 4 },
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'budget_exceeded' });
    expect(tools.sent).toBe(2);
  });

  it('fails a tool request from the call that reached the reserve', async () => {
    const run = new MemoryRun('run_budget', 'work');
    run.usageNow.costMicroUsd = 26 * USD;
    // USD 2 takes it to 28: inside the USD 3 reserve, yet the call asked for a tool.
    const end = await execute(run, new ObservingModel(200_000), new PageTools(true), {
      price,
      costLimits: cost,
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'budget_exceeded' });
    expect(run.usageNow.modelCalls).toBe(1);
  });

  it('gives a zero-priced model no effective cost limit', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const free = modelPrice({
      input_usd_per_mtok: '0',
      cached_input_usd_per_mtok: '0',
      output_usd_per_mtok: '0',
      context_window_tokens: 1000,
    });
    const end = await execute(run, new ObservingModel(10_000_000), new PageTools(true), {
      price: free,
      costLimits: { max_cost_micro_usd: 0, cost_reserve_micro_usd: 0 },
      limits: { ...limits, maxModelCalls: 10, reserveModelCalls: 2 },
    });
    // Only the counts bound it: 7 calls observe, and call 8, which reaches the reserve, answers (d3).
    expect(end).toMatchObject({ kind: 'succeeded' });
    expect(run.usageNow.modelCalls).toBe(8);
  });
});

describe('the loop breaker in the loop (ADR-0130 d7)', () => {
  it('fails loop_detected at the fifth identical observation of an unchanged page, never sending it', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const tools = new PageTools(false);
    const end = await execute(run, new ObservingModel(0), tools, {
      breaker: new LoopBreaker({ evidenceSecret: 's' }),
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'loop_detected' });
    expect(tools.sent).toBe(4);
  });

  it('lets a page that changes on every observation run to 36 observations, then fails it', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const tools = new PageTools(true);
    const end = await execute(run, new ObservingModel(0), tools, {
      breaker: new LoopBreaker({ evidenceSecret: 's' }),
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'loop_detected' });
    expect(tools.sent).toBe(36);
  });

  it('keeps the breaker across executions through its stored state, which never holds the evidence key', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const tools = new PageTools(false);
    const breaker = () => new LoopBreaker({ evidenceSecret: 's' });
    // The first execution is interrupted after three observations; the next one is a new breaker
    // restored from what the first stored.
    const interrupt = new AbortController();
    tools.onSend = (sent) => {
      if (sent === 3) interrupt.abort();
    };
    await expect(
      execute(run, new ObservingModel(0), tools, { breaker: breaker(), signal: interrupt.signal }),
    ).rejects.toThrow(/interrupted/);
    expect(JSON.stringify(run.breakerState)).not.toContain('page-same');
    tools.onSend = undefined;
    const end = await execute(run, new ObservingModel(0), tools, { breaker: breaker() });
    expect(end).toMatchObject({ kind: 'failed', code: 'loop_detected' });
    expect(tools.sent).toBe(4);
  });
});

describe('what the model is sent', () => {
  it('carries the instructions and the runtime metadata row, and defines the required tools first', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const model = new ObservingModel(0);
    await execute(run, model, new PageTools(true), {
      instructions: 'Do the lesson.',
      runtimeMetadata: { browser_origins: 'https://lessons.test' },
      requiredTools: ['browser.navigate', 'browser.observe', 'browser.act'],
      limits: { ...limits, maxModelCalls: 3, reserveModelCalls: 1 },
    });
    expect(model.requests[0]).toMatchObject({
      instructions: 'Do the lesson.',
      runtimeMetadata: { browser_origins: 'https://lessons.test' },
    });
    expect(model.requests[0]?.tools.slice(0, 3).map((tool) => tool.name)).toEqual([
      'browser.navigate',
      'browser.observe',
      'browser.act',
    ]);
  });

  it('fails the run when its plan cannot define the required browser tools', async () => {
    const run = new MemoryRun('run_budget', 'work');
    const noBrowser: ToolExecutor = {
      definitions: () => [],
      execute: async () => ({ ok: true, result: null }),
    };
    const end = await execute(run, new ObservingModel(0), noBrowser, {
      requiredTools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    expect(end).toMatchObject({ kind: 'failed', code: 'model_error' });
    expect(run.usageNow.modelCalls).toBe(0);
  });
});
