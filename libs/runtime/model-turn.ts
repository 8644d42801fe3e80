import type { StepOutcome } from '../contracts/index.js';
import {
  type CostLimits,
  callCostMicroUsd,
  checkCostAfterCall,
  checkCostBeforeCall,
  costToolRequestRefused,
  type ModelPrice,
} from './cost.js';
import { throwIfAborted } from './execution-interrupted.js';
import { checkModelCall, type ModelCallVerdict, toolRequestRefused } from './limits.js';
import type { ExecutionEnd, LoopContext, RunLoopOptions } from './loop-ports.js';
import {
  type Model,
  ModelBudgetExceeded,
  ModelCancelled,
  ModelError,
  type ModelUsage,
  type TranscriptEntry,
} from './model.js';
import { answeringCorrection, finalAnswerEnd } from './output-check.js';
import { pauseIfTakenOver } from './person-turn.js';
import { type ArgumentSealer, recordTurn } from './secret-args.js';
import { ModelStepWriter, OK_STEP } from './step-writers.js';

/**
 * One model turn of an execution (DESIGN §4.3): the cancel flag, the deadline and the limits
 * checked, the model asked, its usage and its turn recorded. Answers the run's end, or undefined
 * when the loop goes on (the turn asked for tools, or its failed step may fail).
 */
export async function takeModelTurn(
  transcript: TranscriptEntry[],
  step: number,
  options: RunLoopOptions,
  clock: () => number,
  context: LoopContext,
): Promise<ExecutionEnd | undefined> {
  const { run, model, limits } = options;
  throwIfAborted(options.signal, options.stopSignal);
  if (await run.cancelRequested()) return { kind: 'cancelled' };
  const paused = await pauseIfTakenOver(options);
  if (paused) return paused;
  if (clock() >= options.deadlineMs)
    return { kind: 'failed', code: 'deadline_exceeded', detail: 'the run passed its deadline', step };

  const usage = await run.usage();
  const spentMicroUsd = usage.costMicroUsd ?? 0;
  const verdict = checkModelCall(limits, usage);
  if (!verdict.allowed) return { kind: 'failed', code: verdict.reason, detail: verdict.detail, step };
  const costVerdict =
    options.price && options.costLimits
      ? checkCostBeforeCall(options.costLimits, spentMicroUsd, options.price)
      : undefined;
  if (costVerdict && !costVerdict.allowed)
    return { kind: 'failed', code: costVerdict.reason, detail: costVerdict.detail, step };
  // A correction of an answer that missed the output schema may only answer (output-check.ts).
  const toolsAllowed =
    verdict.toolsAllowed && (costVerdict?.toolsAllowed ?? true) && !answeringCorrection(transcript);
  // The turn's step starts as the call goes out, its write in flight beside the call
  // (off its critical path); awaited before the step's end is written, so the two keep their order.
  const modelStep = new ModelStepWriter(run, clock, step);
  const started = modelStep.started();
  let response: Awaited<ReturnType<Model['call']>>;
  try {
    response = await model.call(
      {
        transcript,
        tools: toolsAllowed ? context.plan.defined : [],
        ...(options.instructions !== undefined ? { instructions: options.instructions } : {}),
        ...(options.runtimeMetadata ? { runtimeMetadata: options.runtimeMetadata } : {}),
        ...(options.output ? { outputSchema: options.output.schema } : {}),
      },
      {
        deadlineMs: options.deadlineMs,
        signal: options.signal,
        ...(options.price && options.costLimits
          ? { admitAttempt: admitAttempt(options.price, options.costLimits, spentMicroUsd) }
          : {}),
      },
    );
  } catch (error) {
    await started.written();
    throwIfAborted(options.signal);
    if (error instanceof ModelCancelled) {
      // The model's side ended the run as a cancel does; nothing was billed.
      await modelStep.ended(undefined, 0, [], false, {
        ok: false,
        code: 'cancelled',
        message: error.message,
      });
      return { kind: 'cancelled', detail: error.message };
    }
    if (error instanceof ModelError) {
      const billed = error.usage;
      const billedCost = billed && options.price ? callCostMicroUsd(options.price, billed) : 0;
      const end = failedCall(error, billedCost, spentMicroUsd, options, clock, step);
      await Promise.all([
        billed ? run.recordModelCall(billed, billedCost) : undefined,
        modelStep.ended(billed, billedCost, [], false, failureOf(end)),
      ]);
      return end;
    }
    throw error;
  }
  await started.written();
  const callCost = options.price ? callCostMicroUsd(options.price, response.usage) : 0;
  const refusal = budgetRefusal(
    options,
    verdict.allowed ? { ...verdict, toolsAllowed } : verdict,
    spentMicroUsd + callCost,
    response.toolCalls.length,
    step,
  );
  if (refusal) {
    await Promise.all([
      run.recordModelCall(response.usage, callCost),
      modelStep.ended(response.usage, callCost, response.toolCalls, false, failureOf(refusal)),
    ]);
    return refusal;
  }
  // Secret arguments are recorded as `[secret]`; only the dispatched call carries them.
  const recorded = recordTurn(
    response.toolCalls,
    [...context.plan.defined, ...context.plan.deferredIndex],
    transcript,
  );
  for (const [callId, values] of recorded.secrets) context.secrets.set(callId, values);
  const sealedArgs = sealTurnSecrets(recorded.secrets, options.argumentSealer);
  const entry: TranscriptEntry = {
    kind: 'model',
    toolCalls: recorded.toolCalls,
    ...(sealedArgs ? { sealedArgs } : {}),
    ...(response.answer !== undefined ? { answer: response.answer } : {}),
    ...(response.failedStep ? { failedStep: response.failedStep } : {}),
  };
  transcript.push(entry);
  const failed = response.failedStep;
  // Sent back to back, in this order, on one connection: one round trip, the same order as two.
  await Promise.all([
    run.recordModelCall(response.usage, callCost),
    run.appendTranscript(entry),
    modelStep.ended(
      response.usage,
      callCost,
      recorded.toolCalls,
      !failed && recorded.toolCalls.length === 0,
      failed ? { ok: false, code: failed.code, message: failed.message } : OK_STEP,
    ),
  ]);
  if (response.failedStep) {
    // A step that could not name its call fails the run with its code, at this turn,
    // unless it may fail; then the turn is spent and the script goes on.
    if (response.failedStep.mayFail) return undefined;
    return { kind: 'failed', code: response.failedStep.code, detail: response.failedStep.message, step };
  }
  if (response.toolCalls.length === 0)
    return finalAnswerEnd(response.answer ?? '', transcript, step, options);
  return undefined;
}

/**
 * ADR-0130 d1: the check before each attempt of one model call — the run's spend before the call
 * plus what the call's earlier attempts were billed; answers the refusal's detail once the limit is reached.
 */
function admitAttempt(
  price: ModelPrice,
  costLimits: CostLimits,
  spentBeforeCallMicroUsd: number,
): (billed: ModelUsage) => string | undefined {
  return (billed) => {
    const verdict = checkCostBeforeCall(
      costLimits,
      spentBeforeCallMicroUsd + callCostMicroUsd(price, billed),
      price,
    );
    return verdict.allowed ? undefined : verdict.detail;
  };
}

/**
 * The end a recorded model call forces, if any (ADR-0130 d1, ADR-0078): its cost crossed the
 * limit — the run overshoots by at most this one call — or it asked for a tool from inside an
 * answer reserve (the model-call reserve, or at or under the cost reserve).
 */
function budgetRefusal(
  options: RunLoopOptions,
  verdict: ModelCallVerdict,
  spentMicroUsd: number,
  toolCalls: number,
  step: number,
): ExecutionEnd | undefined {
  const { price, costLimits } = options;
  if (price && costLimits) {
    const after = checkCostAfterCall(costLimits, spentMicroUsd, price);
    if (!after.ok) return { kind: 'failed', code: after.reason, detail: after.detail, step };
  }
  if (
    toolRequestRefused(verdict, toolCalls) ||
    (price && costLimits && costToolRequestRefused(costLimits, spentMicroUsd, price, toolCalls))
  )
    return {
      kind: 'failed',
      code: 'budget_exceeded',
      detail: 'a call inside the answer reserve asked for a tool',
      step,
    };
  return undefined;
}

/**
 * The sealed secrets of a turn's calls, by call id: a blob where a sealer is given, else an empty
 * string (held in memory only). Undefined when the turn has none.
 */
function sealTurnSecrets(
  secrets: ReadonlyMap<string, Record<string, string>>,
  sealer: ArgumentSealer | undefined,
): Record<string, string> | undefined {
  if (secrets.size === 0) return undefined;
  const sealed: Record<string, string> = {};
  for (const [callId, values] of secrets) sealed[callId] = sealer ? sealer.seal(callId, values) : '';
  return sealed;
}

/**
 * The end a failed model call forces: the budget its attempts were refused by, the cost limit its
 * billed attempts crossed (ADR-0130 d1: usage is checked again when it is recorded, a failed call's
 * billed attempts too), the deadline it ran past, else `model_error`.
 */
function failedCall(
  error: ModelError,
  billedCost: number,
  spentMicroUsd: number,
  options: RunLoopOptions,
  clock: () => number,
  step: number,
): ExecutionEnd {
  if (error instanceof ModelBudgetExceeded)
    return { kind: 'failed', code: 'budget_exceeded', detail: error.message, step };
  const crossed =
    options.price && options.costLimits
      ? checkCostAfterCall(options.costLimits, spentMicroUsd + billedCost, options.price)
      : undefined;
  if (crossed && !crossed.ok) return { kind: 'failed', code: crossed.reason, detail: crossed.detail, step };
  return clock() >= options.deadlineMs
    ? {
        kind: 'failed',
        code: 'deadline_exceeded',
        detail: 'the run passed its deadline during a model call',
        step,
      }
    : { kind: 'failed', code: 'model_error', detail: error.message, step };
}

/** A turn's end as its step's event tells it (the model step's record has usage, not codes). */
function failureOf(end: ExecutionEnd): StepOutcome {
  return end.kind === 'failed' ? { ok: false, code: end.code, message: end.detail } : OK_STEP;
}
