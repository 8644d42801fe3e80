import { DELEGATE_TOOL_DEFINITION } from './delegation.js';
import type { ExecutionEnd, LoopContext, RunLoopOptions } from './loop-ports.js';
import type { ToolCall, TranscriptEntry } from './model.js';
import { takeModelTurn } from './model-turn.js';
import { tellTakeovers } from './person-turn.js';
import { planRoster, RosterError, type RosterPlan } from './roster.js';
import { answerToolCalls } from './tool-dispatch.js';

export { ExecutionInterrupted } from './execution-interrupted.js';
export type {
  ExecutionEnd,
  Invocation,
  InvocationState,
  RunLoopOptions,
  RunPort,
  ToolCallContext,
  ToolExecutor,
  ToolPolicy,
  ToolRun,
} from './loop-ports.js';

/** Tool definitions per request, the two meta-tools included when the index is used. */
export const DEFAULT_DEFINITION_CAP = 64;

/**
 * One execution of a run (DESIGN §4.3): check limits → model call → record usage → for each tool
 * call: ledger, approval, dispatch → repeat, until an answer, a park, a failure or a cancel. A
 * resumed execution first answers the tool calls its last model turn left open; the ledger makes
 * that safe: a call recorded `dispatched` is never sent again. Its lease tells what became of it
 * where it can (ADR-0127 d3, amended); elsewhere it becomes `outcome_unknown`.
 */
export async function runExecution(options: RunLoopOptions): Promise<ExecutionEnd> {
  const { run, tools } = options;
  const clock = options.clock ?? Date.now;
  let plan: RosterPlan;
  try {
    // ADR-0130 d4: a plan that cannot define the required tools fails when it is built.
    plan = planRoster({
      candidates: [...tools.definitions(), ...(options.policy.delegate ? [DELEGATE_TOOL_DEFINITION] : [])],
      required: options.requiredTools ?? [],
      deferred: [],
      definitionCap: options.definitionCap ?? DEFAULT_DEFINITION_CAP,
    });
  } catch (error) {
    if (error instanceof RosterError)
      return { kind: 'failed', code: 'model_error', detail: error.message, step: 1 };
    throw error;
  }
  const transcript = await run.loadTranscript();
  const context: LoopContext = { plan, breakerLoaded: false, secrets: new Map() };

  for (;;) {
    // The turn a failure from here to the model's answer is told at (see ExecutionEnd).
    const step = modelTurns(transcript) + 1;
    const open = openToolCalls(transcript);
    if (open) {
      const end = await answerToolCalls(open.calls, open.step, transcript, options, clock, context);
      if (end) return end;
      continue;
    }
    // A person who held the page since the model's last turn is told of first (never their typing).
    await tellTakeovers(transcript, options, clock);
    const end = await takeModelTurn(transcript, step, options, clock, context);
    if (end) return end;
  }
}

/** The model turns in a transcript: the run's step index counts them (DESIGN §3, invocation ids). */
function modelTurns(transcript: readonly TranscriptEntry[]): number {
  return transcript.filter((entry) => entry.kind === 'model').length;
}

/** The tool calls of the last model turn that have no result yet, and that turn's step number. */
function openToolCalls(
  transcript: readonly TranscriptEntry[],
): { calls: Array<{ call: ToolCall; index: number }>; step: number } | undefined {
  let step = 0;
  let last: { calls: ToolCall[]; index: number } | undefined;
  transcript.forEach((entry, index) => {
    if (entry.kind === 'model') {
      step += 1;
      last = { calls: entry.toolCalls, index };
    }
  });
  if (!last) return undefined;
  const answered = new Set(
    transcript.slice(last.index + 1).flatMap((entry) => (entry.kind === 'tool' ? [entry.callId] : [])),
  );
  const calls = last.calls
    .map((call, index) => ({ call, index }))
    .filter(({ call }) => !answered.has(call.id));
  return calls.length > 0 ? { calls, step } : undefined;
}
