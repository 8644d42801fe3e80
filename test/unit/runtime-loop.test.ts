import { describe, expect, it } from 'vitest';
import { ScriptedModel, scriptSchema } from '../../libs/models/index.js';
import {
  type Invocation,
  runExecution,
  type ToolCall,
  type ToolExecutor,
  type ToolOutcome,
  type ToolPolicy,
} from '../../libs/runtime/index.js';
import { MemoryRun, TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

class RecordingTools implements ToolExecutor {
  sent: ToolCall[] = [];
  crashAfterDispatch = false;
  definitions() {
    return [{ name: 'browser.navigate', description: '', parameters: {} }];
  }
  async execute(call: ToolCall, context: { beforeDispatch: () => Promise<void> }): Promise<ToolOutcome> {
    await context.beforeDispatch();
    this.sent.push(call);
    if (this.crashAfterDispatch) throw new Error('worker died');
    return {
      ok: true,
      result: {
        observation: {
          revision: `r${this.sent.length}`,
          elements: [{ ref: 'e1', role: 'button', name: 'Buy' }],
        },
      },
    };
  }
}

class ApprovalPolicy implements ToolPolicy {
  constructor(private readonly run: MemoryRun) {}
  async needsApproval({ call }: Invocation) {
    return call.name === 'browser.act';
  }
  async park({ id }: Invocation) {
    this.run.ledger.set(id, { state: 'awaiting_approval', approvalId: 'apr_1' });
    return 'apr_1';
  }
}

const script = scriptSchema.parse({
  steps: [
    { tool: 'browser.navigate', url: 'https://shop.test/' },
    { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' },
  ],
  answer: 'bought',
});

function execute(
  run: MemoryRun,
  tools: RecordingTools,
  overrides: Partial<Parameters<typeof runExecution>[0]> = {},
) {
  return runExecution({
    run,
    model: new ScriptedModel(script),
    tools,
    policy: new ApprovalPolicy(run),
    limits: TEST_LOOP_LIMITS,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
    ...overrides,
  });
}

describe('one execution of the run loop', () => {
  it('parks on an action that needs approval, and after approval resumes and sends it once', async () => {
    const run = new MemoryRun();
    const tools = new RecordingTools();
    expect(await execute(run, tools)).toEqual({ kind: 'parked', approvalId: 'apr_1' });
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate']);

    const [invocationId] = [...run.ledger].find(([, state]) => state.state === 'awaiting_approval') ?? [];
    run.ledger.set(invocationId as string, { state: 'approved' });
    expect(await execute(run, tools)).toEqual({ kind: 'succeeded', answer: 'bought' });
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate', 'browser.act']);
    expect(run.usageNow).toMatchObject({ modelCalls: 3, toolCalls: 2 });
  });

  it('never sends again an effect dispatched before a crash: it becomes outcome_unknown', async () => {
    const run = new MemoryRun();
    const tools = new RecordingTools();
    tools.crashAfterDispatch = true;
    await expect(execute(run, tools)).rejects.toThrow('worker died');
    expect(tools.sent).toHaveLength(1);

    tools.crashAfterDispatch = false;
    // The resumed execution (another worker) answers the open call from the ledger, then goes on.
    const end = await execute(run, tools, {
      policy: { needsApproval: async () => false, park: async () => 'x' },
    });
    expect(tools.sent.filter((call) => call.name === 'browser.navigate')).toHaveLength(1);
    const navigateResult = run.transcript.find(
      (entry) => entry.kind === 'tool' && entry.name === 'browser.navigate',
    );
    expect(navigateResult).toMatchObject({ outcome: { ok: false, code: 'outcome_unknown' } });
    // A script stops at its first failing step, with that step's own code.
    expect(end).toMatchObject({ kind: 'failed', code: 'outcome_unknown', step: 1 });
  });

  it('ends a scripted run approval_denied at the denied step, the denial written as the tool result', async () => {
    const run = new MemoryRun();
    const tools = new RecordingTools();
    await execute(run, tools);
    const [invocationId] = [...run.ledger].find(([, state]) => state.state === 'awaiting_approval') ?? [];
    run.ledger.set(invocationId as string, { state: 'denied', message: 'not today' });
    expect(await execute(run, tools)).toEqual({
      kind: 'failed',
      code: 'approval_denied',
      detail: 'not today',
      step: 2,
    });
    expect(tools.sent.map((call) => call.name)).toEqual(['browser.navigate']);
    expect(run.transcript.at(-1)).toMatchObject({
      kind: 'tool',
      outcome: { ok: false, code: 'approval_denied' },
    });
  });

  it('stops before its next model call once cancelled', async () => {
    const run = new MemoryRun();
    run.cancel = true;
    const tools = new RecordingTools();
    expect(await execute(run, tools)).toEqual({ kind: 'cancelled' });
    expect(run.usageNow.modelCalls).toBe(0);
  });

  it('fails budget_exceeded at the model-call limit', async () => {
    const run = new MemoryRun();
    run.usageNow.modelCalls = 24;
    expect(await execute(run, new RecordingTools())).toMatchObject({
      kind: 'failed',
      code: 'budget_exceeded',
    });
  });

  it('fails deadline_exceeded past the run deadline', async () => {
    const run = new MemoryRun();
    expect(await execute(run, new RecordingTools(), { deadlineMs: Date.now() - 1 })).toMatchObject({
      kind: 'failed',
      code: 'deadline_exceeded',
    });
  });
});

describe('a call the ledger shows completed, answered again after a crash', () => {
  it('tells the model to observe again when the ledger kept the page and not its observation', async () => {
    const run = new MemoryRun();
    const tools = new RecordingTools();
    const navigateOnly = scriptSchema.parse({
      steps: [{ tool: 'browser.navigate', url: 'https://shop.test/' }],
      answer: 'there',
    });
    // The crash came between the ledger's completion and the transcript's answer.
    run.transcript.push({
      kind: 'model',
      toolCalls: [{ id: 'call_1', name: 'browser.navigate', args: { url: 'https://shop.test/' } }],
    });
    run.ledger.set(run.invocationId(1, 0), {
      state: 'completed',
      outcome: { ok: true, result: { page: { url: 'https://shop.test/', title: 'Shop' } } },
    });
    await execute(run, tools, { model: new ScriptedModel(navigateOnly) });
    expect(tools.sent).toEqual([]);
    const answer = run.transcript.find((entry) => entry.kind === 'tool');
    expect(answer).toMatchObject({
      kind: 'tool',
      outcome: { ok: true, result: { page: { url: 'https://shop.test/', title: 'Shop' } } },
    });
    const note = (answer as { outcome: { result: { note?: string } } }).outcome.result.note;
    expect(note).toMatch(/observe/);
  });
});
