import { describe, expect, it } from 'vitest';
import {
  RUN_ERROR_CODES,
  RUN_ERROR_TABLE,
  TOOL_ERROR_CODES,
  toolFailureEnd,
} from '../../libs/contracts/index.js';
import { ScriptedModel, scriptSchema } from '../../libs/models/index.js';
import {
  type Model,
  type ModelRequest,
  type ModelResponse,
  runExecution,
  type ToolCall,
  type ToolExecutor,
  type ToolOutcome,
  type ToolPolicy,
} from '../../libs/runtime/index.js';
import { MemoryRun, TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

const observation = (revision: string) => ({
  ok: true as const,
  result: { observation: { revision, elements: [{ ref: 'e1', role: 'button', name: 'Buy' }] } },
});

/** Answers each call by its place in the run: a refusal where the test says, an observation elsewhere. */
class AnsweringTools implements ToolExecutor {
  sent: ToolCall[] = [];
  constructor(private readonly refusals: Record<number, { code: string; message: string }> = {}) {}
  definitions() {
    return ['browser.navigate', 'browser.observe', 'browser.act'].map((name) => ({
      name,
      description: '',
      parameters: {},
    }));
  }
  async execute(call: ToolCall, context: { beforeDispatch: () => Promise<void> }): Promise<ToolOutcome> {
    await context.beforeDispatch();
    this.sent.push(call);
    const refusal = this.refusals[this.sent.length];
    return refusal ? { ok: false, ...refusal } : observation(`r${this.sent.length}`);
  }
}

const noApprovals: ToolPolicy = {
  needsApproval: async () => false,
  park: async () => 'apr_never',
};

function execute(run: MemoryRun, model: Model, tools: ToolExecutor) {
  return runExecution({
    run,
    model,
    tools,
    policy: noApprovals,
    limits: TEST_LOOP_LIMITS,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
  });
}

/** A model that calls navigate until it has seen `turns` tool results, then answers. */
class PlayedModel implements Model {
  readonly name = 'played';
  constructor(private readonly turns: number) {}
  async call(request: ModelRequest): Promise<ModelResponse> {
    const seen = request.transcript.filter((entry) => entry.kind === 'tool').length;
    const usage = { inputTokens: 1, cachedInputTokens: 0, outputTokens: 1 };
    if (seen >= this.turns) return { toolCalls: [], answer: 'done', usage };
    return {
      toolCalls: [{ id: `c${seen + 1}`, name: 'browser.navigate', args: { url: 'https://a.test/' } }],
      usage,
    };
  }
}

describe('truthful ends', () => {
  it('fails a scripted run url_disallowed at the step whose navigate was refused, instead of succeeding', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools({
      2: { code: 'url_disallowed', message: 'https://evil.test is not allowed' },
    });
    const script = scriptSchema.parse({
      steps: [
        { tool: 'browser.navigate', url: 'https://a.test/' },
        { tool: 'browser.navigate', url: 'https://evil.test/' },
        { tool: 'browser.observe' },
      ],
      answer: 'done',
    });
    const end = await execute(run, new ScriptedModel(script), tools);
    expect(end).toEqual({
      kind: 'failed',
      code: 'url_disallowed',
      detail: 'https://evil.test is not allowed',
      step: 2,
    });
    // It stopped at the failing step: the observe after it was never sent.
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate', 'browser.navigate']);
  });

  it('lets a scripted step that says may_fail go on past its refusal to the next step', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools({ 1: { code: 'url_disallowed', message: 'not allowed' } });
    const script = scriptSchema.parse({
      steps: [
        { tool: 'browser.navigate', url: 'https://evil.test/', may_fail: true },
        { tool: 'browser.observe' },
      ],
      answer: 'done anyway',
    });
    const end = await execute(run, new ScriptedModel(script), tools);
    expect(end).toEqual({ kind: 'succeeded', answer: 'done anyway' });
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate', 'browser.observe']);
  });

  it('fails a scripted act whose element is not on the page element_not_found at its step, not model_error', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools();
    const script = scriptSchema.parse({
      steps: [
        { tool: 'browser.navigate', url: 'https://a.test/' },
        { tool: 'browser.act', target: { role: 'link', name: 'Missing' }, action: 'click' },
      ],
      answer: 'done',
    });
    const end = await execute(run, new ScriptedModel(script), tools);
    expect(end).toMatchObject({ kind: 'failed', code: 'element_not_found', step: 2 });
    expect(tools.sent).toHaveLength(1);
  });

  it('skips a scripted act on a missing element that may fail and goes on with the script', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools();
    const script = scriptSchema.parse({
      steps: [
        { tool: 'browser.navigate', url: 'https://a.test/' },
        {
          tool: 'browser.act',
          target: { role: 'link', name: 'Cookie banner' },
          action: 'click',
          may_fail: true,
        },
        { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' },
      ],
      answer: 'bought',
    });
    const end = await execute(run, new ScriptedModel(script), tools);
    expect(end).toEqual({ kind: 'succeeded', answer: 'bought' });
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate', 'browser.act']);
  });

  it('gives a model page_changed as its tool result and lets it recover', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools({ 1: { code: 'page_changed', message: 'revision r0 is gone' } });
    const end = await execute(run, new PlayedModel(2), tools);
    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });
    expect(run.transcript).toContainEqual(
      expect.objectContaining({ kind: 'tool', outcome: expect.objectContaining({ code: 'page_changed' }) }),
    );
  });

  it('ends a model-driven run profile_unavailable at the call that met it: no call of the run frees the profile', async () => {
    const run = new MemoryRun();
    const tools = new AnsweringTools({ 2: { code: 'profile_unavailable', message: 'held by run_other' } });
    const end = await execute(run, new PlayedModel(5), tools);
    expect(end).toEqual({
      kind: 'failed',
      code: 'profile_unavailable',
      detail: 'held by run_other',
      step: 2,
    });
    expect(tools.sent).toHaveLength(2);
  });

  it('names a model failure model_error with the turn it was asked for', async () => {
    const run = new MemoryRun();
    const broken: Model = {
      name: 'broken',
      call: async () => {
        throw new (await import('../../libs/runtime/index.js')).ModelError('the model service kept failing');
      },
    };
    const end = await execute(run, broken, new AnsweringTools());
    expect(end).toEqual({
      kind: 'failed',
      code: 'model_error',
      detail: 'the model service kept failing',
      step: 1,
    });
  });

  it('gives every run error code one outcome, and fails a script on every tool code unless it may fail', () => {
    expect(Object.keys(RUN_ERROR_TABLE).sort()).toEqual([...RUN_ERROR_CODES].sort());
    for (const code of TOOL_ERROR_CODES) {
      expect(toolFailureEnd(code, { scripted: true, mayFail: false })).toEqual({ ends: true, code });
      expect(toolFailureEnd(code, { scripted: true, mayFail: true })).toEqual({ ends: false });
    }
    expect(toolFailureEnd('page_changed', { scripted: false, mayFail: false })).toEqual({ ends: false });
    expect(toolFailureEnd('provider_unavailable', { scripted: false, mayFail: false })).toEqual({
      ends: true,
      code: 'provider_unavailable',
    });
    expect(toolFailureEnd('a_future_code', { scripted: true, mayFail: false })).toEqual({
      ends: true,
      code: 'internal_error',
    });
  });
});
