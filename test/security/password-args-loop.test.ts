import { describe, expect, it } from 'vitest';
import {
  argumentSealer,
  type Invocation,
  type Model,
  runExecution,
  type ToolCall,
  type ToolExecutor,
  type ToolOutcome,
  type ToolPolicy,
} from '../../libs/runtime/index.js';
import { MemoryRun, TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

/** A page with a password field: observe shows it (never its value); act is the effect. */
class LoginTools implements ToolExecutor {
  sent: ToolCall[] = [];
  definitions() {
    return [
      { name: 'browser.observe', description: '', parameters: {} },
      { name: 'browser.act', description: '', parameters: {} },
    ];
  }
  async execute(call: ToolCall, context: { beforeDispatch: () => Promise<void> }): Promise<ToolOutcome> {
    if (call.name === 'browser.act') await context.beforeDispatch();
    this.sent.push(structuredClone(call));
    return {
      ok: true,
      result: {
        observation: {
          revision: 'rev1',
          elements: [{ ref: 'e7', role: 'textbox', name: 'Password', state: { value_present: false } }],
        },
      },
    };
  }
}

/** Observe, then fill the password field, then answer. */
const signIn: Model = {
  name: 'sign-in',
  async call(request) {
    const usage = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
    const turns = request.transcript.filter((entry) => entry.kind === 'model').length;
    if (turns === 0) return { toolCalls: [{ id: 'c1', name: 'browser.observe', args: {} }], usage };
    if (turns === 1)
      return {
        toolCalls: [
          {
            id: 'c2',
            name: 'browser.act',
            args: { revision: 'rev1', element: 'e7', action: 'fill', text: 'hunter2' },
          },
        ],
        usage,
      };
    return { toolCalls: [], answer: 'in', usage };
  },
};

/** Parks the act on its approval the first time; the resumed execution finds it approved. */
class ParkOnce implements ToolPolicy {
  parkedArgs: unknown;
  constructor(private readonly run: MemoryRun) {}
  async needsApproval({ call }: Invocation) {
    return call.name === 'browser.act';
  }
  async park({ id, call }: Invocation) {
    this.parkedArgs = structuredClone(call.args);
    this.run.ledger.set(id, { state: 'awaiting_approval', approvalId: 'apr_1' });
    return 'apr_1';
  }
}

async function parkThenResume(sealers: {
  first?: ReturnType<typeof argumentSealer>;
  second?: ReturnType<typeof argumentSealer>;
}) {
  const run = new MemoryRun('run_pw');
  const tools = new LoginTools();
  const policy = new ParkOnce(run);
  const options = {
    run,
    model: signIn,
    tools,
    policy,
    limits: TEST_LOOP_LIMITS,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
  };
  const parked = await runExecution({
    ...options,
    ...(sealers.first ? { argumentSealer: sealers.first } : {}),
  });
  expect(parked).toEqual({ kind: 'parked', approvalId: 'apr_1' });
  // The owner approves; a new execution (a new process, say) resumes the parked call.
  for (const [id, state] of run.ledger)
    if (state.state === 'awaiting_approval') run.ledger.set(id, { state: 'approved' });
  const end = await runExecution({
    ...options,
    ...(sealers.second ? { argumentSealer: sealers.second } : {}),
  });
  return { run, tools, policy, end };
}

describe('a parked call with a secret argument (passwords)', () => {
  it('records [secret] for the approval and the transcript, and types the real text when resumed', async () => {
    const { run, tools, policy, end } = await parkThenResume({
      first: argumentSealer('deployment-secret', 'run_pw'),
      second: argumentSealer('deployment-secret', 'run_pw'),
    });
    expect(end).toEqual({ kind: 'succeeded', answer: 'in' });
    expect(policy.parkedArgs).toMatchObject({ action: 'fill', text: '[secret]' });
    expect(tools.sent.find((call) => call.name === 'browser.act')?.args.text).toBe('hunter2');
    expect(JSON.stringify(run.transcript)).not.toContain('hunter2');
    expect(JSON.stringify([...run.ledger])).not.toContain('hunter2');
  });

  it('never sends the marker: without the sealed value the resumed call is refused, not dispatched', async () => {
    const { tools, run } = await parkThenResume({});
    expect(tools.sent.filter((call) => call.name === 'browser.act')).toEqual([]);
    const answered = run.transcript.find((entry) => entry.kind === 'tool' && entry.callId === 'c2');
    expect(answered).toMatchObject({ outcome: { ok: false, code: 'invalid_arguments' } });
  });
});
