import { throwIfAborted } from './execution-interrupted.js';
import { fitBatch } from './limits.js';
import type { ExecutionEnd, Invocation, LoopContext, RunLoopOptions } from './loop-ports.js';
import type { ToolCall, TranscriptEntry } from './model.js';
import { pauseIfTakenOver } from './person-turn.js';
import {
  answer,
  endedBy,
  resolveFromRoster,
  runChain,
  type Settled,
  stepWriterOf,
  type TurnContext,
} from './tool-call-chain.js';

/**
 * Answers the open tool calls of one model turn, in order: each through the roster, then the
 * chain of `tool-call-chain.ts` (ledger, breaker, delegation, approval, dispatch, record). Answers
 * the run's end, or undefined when every call of the batch has its result and the loop goes on to
 * the next model turn.
 */
export async function answerToolCalls(
  calls: Array<{ call: ToolCall; index: number }>,
  step: number,
  transcript: TranscriptEntry[],
  options: RunLoopOptions,
  clock: () => number,
  context: LoopContext,
): Promise<ExecutionEnd | undefined> {
  const { run, limits, breaker } = options;
  const turn: TurnContext = { options, clock, transcript, loop: context, step };
  const usage = await run.usage();
  const { run: batch, skipped } = fitBatch(limits, usage, calls);
  if (breaker && !context.breakerLoaded && batch.length > 0) {
    // The breaker carries over from the run's earlier executions (a park, a crash).
    const stored = await run.loadBreakerState?.();
    if (stored !== undefined && stored !== null) breaker.restoreFrom(stored);
    context.breakerLoaded = true;
  }
  for (const { call: asked, index } of batch) {
    throwIfAborted(options.signal, options.stopSignal);
    if (await run.cancelRequested()) return { kind: 'cancelled' };
    const paused = await pauseIfTakenOver(options);
    if (paused) return paused;
    const settled = await answerCall(turn, asked, index);
    if (settled.kind === 'ended') return settled.end;
    const end = endedBy(turn, asked, settled.outcome);
    if (end) return end;
  }
  for (const { call } of skipped) {
    await answer(turn, call, {
      ok: false,
      code: 'budget_exceeded',
      message: 'no tool calls left in this run; answer now',
    });
  }
  return undefined;
}

/** One call: resolved by the roster, started in the ledger (its step beside it), then the chain. */
async function answerCall(turn: TurnContext, asked: ToolCall, index: number): Promise<Settled> {
  const resolved = await resolveFromRoster(turn, asked, index);
  if ('settled' in resolved) return resolved.settled;
  const { call } = resolved;
  const { run } = turn.options;
  const invocation: Invocation = { id: run.invocationId(turn.step, index), step: turn.step, index, call };
  const steps = stepWriterOf(turn, call, index);
  // `started` goes with the ledger's start; a step recorded already (a replay) is left as it is.
  const [known] = await Promise.all([run.startInvocation(invocation), steps.startedIfNew()]);
  return runChain({ ...turn, asked, call, invocation, steps, known });
}
