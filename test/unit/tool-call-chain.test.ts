import { describe, expect, it } from 'vitest';
import { ScriptedModel, scriptSchema } from '../../libs/models/index.js';
import {
  type InvocationState,
  LoopBreaker,
  planRoster,
  type RunLoopOptions,
  type ToolCall,
  type ToolExecutor,
  type ToolOutcome,
  type TranscriptEntry,
} from '../../libs/runtime/index.js';
import type { StepWrite } from '../../libs/runtime/loop-ports.js';
import {
  admitByBreaker,
  answerForPerson,
  awaitApproval,
  type CallContext,
  delegateToChild,
  dispatch,
  record,
  replayFromLedger,
  resolveFromRoster,
  runChain,
  stepWriterOf,
  type TurnContext,
} from '../../libs/runtime/tool-call-chain.js';
import { performCall } from '../../libs/runtime/tool-run.js';
import { MemoryRun, TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

/** A run that also keeps the step records the chain writes, and what it marked unverified. */
class SteppedRun extends MemoryRun {
  steps: StepWrite[] = [];
  unverified: string[] = [];
  async recordStep(step: StepWrite) {
    this.steps.push(structuredClone(step));
  }
  async markUnverified(_invocation: unknown, error: { code: string }) {
    this.unverified.push(error.code);
  }
}

const observed = (revision: string): ToolOutcome => ({ ok: true, result: { observation: { revision } } });

/** Sends each call, counting them, and hands back a fixed evidence key and screenshot with it. */
class PerformingTools implements ToolExecutor {
  sent: ToolCall[] = [];
  definitions() {
    return [{ name: 'browser.observe', description: '', parameters: {} }];
  }
  async perform(call: ToolCall, context: { beforeDispatch: () => Promise<void> }) {
    await context.beforeDispatch();
    this.sent.push(call);
    return {
      outcome: observed(`r${this.sent.length}`),
      evidenceKey: 'page-a',
      artifacts: { screenshot: 'shot-1' },
    };
  }
  async execute(): Promise<ToolOutcome> {
    throw new Error('the chain dispatches through perform');
  }
}

const observe: ToolCall = { id: 'c1', name: 'browser.observe', args: {} };

function turnOf(run: SteppedRun, overrides: Partial<RunLoopOptions> = {}): TurnContext {
  const transcript: TranscriptEntry[] = [{ kind: 'model', toolCalls: [observe] } as TranscriptEntry];
  const options: RunLoopOptions = {
    run,
    model: new ScriptedModel(scriptSchema.parse({ steps: [], answer: 'done' })),
    tools: new PerformingTools(),
    policy: { needsApproval: async () => false, park: async () => 'apr_1' },
    limits: TEST_LOOP_LIMITS,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
    ...overrides,
  };
  const plan = planRoster({
    candidates: options.tools.definitions(),
    required: [],
    deferred: [],
    definitionCap: 64,
  });
  return {
    options,
    clock: Date.now,
    transcript,
    loop: { plan, breakerLoaded: true, secrets: new Map() },
    step: 1,
  };
}

function callOf(turn: TurnContext, known: InvocationState, call: ToolCall = observe): CallContext {
  const invocation = { id: turn.options.run.invocationId(1, 0), step: 1, index: 0, call };
  return { ...turn, asked: call, call, invocation, steps: stepWriterOf(turn, call, 0), known };
}

const breakerOf = () => new LoopBreaker({ evidenceSecret: 'test-secret' });

describe('the roster step', () => {
  it('answers tool.search itself, and passes any other call on unchanged', async () => {
    const run = new SteppedRun();
    const turn = turnOf(run);
    const search = await resolveFromRoster(turn, { id: 's1', name: 'tool.search', args: { query: 'x' } }, 0);
    expect(search).toEqual({ settled: { kind: 'answered', outcome: { ok: true, result: { tools: [] } } } });
    expect(run.ledger.size).toBe(0);
    expect(await resolveFromRoster(turn, observe, 0)).toEqual({ call: observe });
  });
});

describe('the ledger replay step', () => {
  it('answers a completed browser call from the ledger, telling the model to look again, and sends nothing', async () => {
    const run = new SteppedRun();
    const context = callOf(turnOf(run), { state: 'completed', outcome: { ok: true, result: {} } });
    expect(await replayFromLedger(context)).toEqual({ kind: 'answered', outcome: { ok: true, result: {} } });
    const answer = run.transcript.at(-1);
    expect(answer).toMatchObject({
      kind: 'tool',
      callId: 'c1',
      outcome: { ok: true, result: { note: expect.any(String) } },
    });
    expect((context.options.tools as PerformingTools).sent).toEqual([]);
  });

  it('answers a call dispatched before a crash outcome_unknown, in the ledger as in the transcript', async () => {
    const run = new SteppedRun();
    const settled = await replayFromLedger(callOf(turnOf(run), { state: 'dispatched' }));
    expect(settled).toMatchObject({ kind: 'answered', outcome: { ok: false, code: 'outcome_unknown' } });
    expect(run.ledger.get('run_test-s1-i0')).toMatchObject({
      state: 'completed',
      outcome: { code: 'outcome_unknown' },
    });
  });

  it('parks on a call still awaiting its approval, and hands an approved one on', async () => {
    const run = new SteppedRun();
    expect(
      await replayFromLedger(callOf(turnOf(run), { state: 'awaiting_approval', approvalId: 'apr_9' })),
    ).toEqual({
      kind: 'ended',
      end: { kind: 'parked', approvalId: 'apr_9' },
    });
    expect(
      await replayFromLedger(callOf(turnOf(run), { state: 'approved', approvalId: 'apr_9' })),
    ).toBeUndefined();
    expect(await replayFromLedger(callOf(turnOf(run), { state: 'new' }))).toBeUndefined();
  });

  it('answers a denied call approval_denied, its step naming the approval', async () => {
    const run = new SteppedRun();
    const context = callOf(turnOf(run), { state: 'denied', message: 'no', approvalId: 'apr_2' });
    expect(await replayFromLedger(context)).toMatchObject({
      outcome: { ok: false, code: 'approval_denied' },
    });
    expect(run.steps.at(-1)?.tool).toMatchObject({
      approval_id: 'apr_2',
      outcome: { code: 'approval_denied' },
    });
  });
});

describe('the breaker step', () => {
  it('ends the run loop_detected at the fifth identical call, with its step refused and the breaker saved', async () => {
    const run = new SteppedRun();
    const breaker = breakerOf();
    for (let n = 0; n < 4; n += 1) breaker.admit({ id: `earlier-${n}`, call: observe });
    const settled = await admitByBreaker(callOf(turnOf(run, { breaker }), { state: 'new' }));
    expect(settled).toMatchObject({ kind: 'ended', end: { kind: 'failed', code: 'loop_detected', step: 1 } });
    expect(run.steps.at(-1)).toMatchObject({ status: 'ended', tool: { outcome: { code: 'loop_detected' } } });
    expect(run.breakerState).toEqual(breaker.snapshot());
  });

  it('hands on a call it admits, and any call of a run without a breaker', async () => {
    const run = new SteppedRun();
    expect(
      await admitByBreaker(callOf(turnOf(run, { breaker: breakerOf() }), { state: 'new' })),
    ).toBeUndefined();
    expect(await admitByBreaker(callOf(turnOf(run), { state: 'new' }))).toBeUndefined();
  });
});

describe('the delegation step', () => {
  const delegate: ToolCall = { id: 'd1', name: 'agent.delegate', args: { input: 'x' } };

  it('tells a run that may not delegate so, in the ledger and the transcript', async () => {
    const run = new SteppedRun();
    const settled = await delegateToChild(callOf(turnOf(run), { state: 'new' }, delegate));
    expect(settled).toMatchObject({ kind: 'answered', outcome: { ok: false, code: 'invalid_arguments' } });
    expect(run.ledger.get('run_test-s1-i0')).toMatchObject({ state: 'completed' });
  });

  it('moves the run to waiting on its child, and leaves any other call alone', async () => {
    const run = new SteppedRun();
    const policy = {
      needsApproval: async () => false,
      park: async () => 'apr_1',
      delegate: async () => ({ kind: 'waiting' as const, childRunId: 'run_child' }),
    };
    expect(await delegateToChild(callOf(turnOf(run, { policy }), { state: 'new' }, delegate))).toEqual({
      kind: 'ended',
      end: { kind: 'waiting_child', childRunId: 'run_child' },
    });
    expect(await delegateToChild(callOf(turnOf(run, { policy }), { state: 'new' }))).toBeUndefined();
  });
});

describe('the approval step', () => {
  it('parks a call that needs an approval, its step waiting on it', async () => {
    const run = new SteppedRun();
    const policy = { needsApproval: async () => true, park: async () => 'apr_7' };
    expect(await awaitApproval(callOf(turnOf(run, { policy }), { state: 'new' }))).toEqual({
      kind: 'ended',
      end: { kind: 'parked', approvalId: 'apr_7' },
    });
    expect(run.steps.at(-1)).toMatchObject({ status: 'waiting_approval', tool: { approval_id: 'apr_7' } });
  });

  it('lets an approved call through, its step started again', async () => {
    const run = new SteppedRun();
    const policy = { needsApproval: async () => true, park: async () => 'apr_never' };
    expect(
      await awaitApproval(callOf(turnOf(run, { policy }), { state: 'approved', approvalId: 'apr_3' })),
    ).toBeUndefined();
    expect(run.steps.at(-1)).toMatchObject({ status: 'started' });
  });
});

describe("the person's request step", () => {
  it('answers an approved request for a person without sending it, with the page as it is now', async () => {
    const run = new SteppedRun();
    const ask: ToolCall = { id: 'p1', name: 'browser.request_person', args: { reason: 'a code' } };
    const turn = turnOf(run);
    const settled = await answerForPerson(callOf(turn, { state: 'approved', approvalId: 'apr_4' }, ask));
    expect(settled).toMatchObject({
      kind: 'answered',
      outcome: { ok: true, result: { person: null, observation: { revision: 'r1' } } },
    });
    // Only the fresh observation went out, never the request itself.
    expect((turn.options.tools as PerformingTools).sent.map((call) => call.name)).toEqual([
      'browser.observe',
    ]);
    expect(await answerForPerson(callOf(turn, { state: 'approved' }))).toBeUndefined();
  });
});

describe('the dispatch step', () => {
  it('answers the outcome with the evidence key and artifacts the executor handed back with it', async () => {
    const run = new SteppedRun();
    const dispatched = await dispatch(callOf(turnOf(run), { state: 'new' }));
    expect(dispatched).toMatchObject({
      outcome: observed('r1'),
      evidenceKey: 'page-a',
      artifacts: { screenshot: 'shot-1' },
    });
    expect(run.ledger.get('run_test-s1-i0')).toEqual({ state: 'dispatched' });
  });

  it('takes them from an executor written to execute alone at once after its call', async () => {
    let key: string | null = null;
    const tools: ToolExecutor = {
      definitions: () => [],
      execute: async () => {
        key = 'page-b';
        return observed('r1');
      },
      takeEvidenceKey: () => key,
    };
    const context = {
      invocationId: 'i',
      deadlineMs: 0,
      signal: new AbortController().signal,
      beforeDispatch: async () => {},
    };
    expect(await performCall(tools, observe, context)).toEqual({
      outcome: observed('r1'),
      evidenceKey: 'page-b',
      artifacts: {},
    });
  });

  it('never sends a call whose secret text is held no more', async () => {
    const run = new SteppedRun();
    const turn = turnOf(run);
    turn.transcript.splice(0, 1, {
      kind: 'model',
      toolCalls: [observe],
      sealedArgs: { c1: '' },
    } as TranscriptEntry);
    const dispatched = await dispatch(callOf(turn, { state: 'new' }));
    expect(dispatched.outcome).toMatchObject({ ok: false, code: 'invalid_arguments' });
    expect((turn.options.tools as PerformingTools).sent).toEqual([]);
  });
});

describe('the record step', () => {
  it('gives the evidence key to the breaker only, and the artifacts to the step', async () => {
    const run = new SteppedRun();
    const breaker = breakerOf();
    const context = callOf(turnOf(run, { breaker }), { state: 'new' });
    breaker.admit(context.invocation);
    await record(context, {
      outcome: observed('r1'),
      evidenceKey: 'page-secret-key',
      artifacts: { screenshot: 'shot-1' },
      durationMs: 5,
    });
    expect(run.ledger.get('run_test-s1-i0')).toEqual({ state: 'completed', outcome: observed('r1') });
    expect(run.steps.at(-1)).toMatchObject({
      status: 'ended',
      duration_ms: 5,
      tool: { screenshot: 'shot-1' },
    });
    expect(run.breakerState).toEqual(breaker.snapshot());
    const stored = JSON.stringify([
      run.ledger.get('run_test-s1-i0'),
      run.transcript,
      run.steps,
      run.breakerState,
    ]);
    expect(stored).not.toContain('page-secret-key');
  });

  it('marks the run unverified after a call that failed unverified', async () => {
    const run = new SteppedRun();
    const failed: ToolOutcome = {
      ok: false,
      code: 'browser_unavailable',
      message: 'no lease',
      unverified: true,
    };
    await record(callOf(turnOf(run), { state: 'new' }), {
      outcome: failed,
      evidenceKey: null,
      artifacts: {},
      durationMs: 1,
    });
    expect(run.unverified).toEqual(['browser_unavailable']);
  });
});

describe('the chain', () => {
  it('sends a call the ledger already completed never, and a new one once', async () => {
    const run = new SteppedRun();
    const turn = turnOf(run);
    await runChain(callOf(turn, { state: 'completed', outcome: observed('r0') }));
    expect((turn.options.tools as PerformingTools).sent).toHaveLength(0);
    expect(await runChain(callOf(turn, { state: 'new' }))).toEqual({
      kind: 'answered',
      outcome: observed('r1'),
    });
    expect((turn.options.tools as PerformingTools).sent).toHaveLength(1);
  });
});
