import { assertNever, type RunErrorCode, toolFailureEnd } from '../contracts/index.js';
import type { LoopBreaker } from './breaker.js';
import {
  type CostLimits,
  callCostMicroUsd,
  checkCostAfterCall,
  checkCostBeforeCall,
  costToolRequestRefused,
  type ModelPrice,
} from './cost.js';
import { DELEGATE_TOOL_DEFINITION, DELEGATE_TOOL_NAME, type DelegateStep } from './delegation.js';
import {
  checkModelCall,
  fitBatch,
  type ModelCallVerdict,
  type RunLimits,
  type RunUsage,
  toolRequestRefused,
} from './limits.js';
import {
  type Model,
  ModelBudgetExceeded,
  ModelError,
  type ModelUsage,
  type ToolCall,
  type ToolDefinition,
  type ToolOutcome,
  type TranscriptEntry,
} from './model.js';
import {
  planRoster,
  RosterError,
  type RosterPlan,
  resolveDeferredCall,
  searchDeferredTools,
  TOOL_CALL_NAME,
  TOOL_SEARCH_NAME,
} from './roster.js';
import { type ArgumentSealer, recordTurn, revealCall } from './secret-args.js';

/** A tool call's durable state in the run's ledger (DESIGN §3). */
export type InvocationState =
  | { state: 'new' }
  | { state: 'started' }
  | { state: 'awaiting_approval'; approvalId: string }
  | { state: 'approved' }
  | { state: 'denied'; message: string }
  | { state: 'dispatched' }
  | { state: 'completed'; outcome: ToolOutcome }
  | { state: 'outcome_unknown' };

/** One tool call's durable identity: the run, the model turn (step) and its place in the turn. */
export interface Invocation {
  id: string;
  step: number;
  index: number;
  call: ToolCall;
}

/**
 * The run as the loop sees it: its transcript, usage, ledger and status, each change durable before
 * the loop goes on. Implemented over the run store; every write is refused once the worker lost the run.
 */
export interface RunPort {
  readonly runId: string;
  /** The durable id of a tool call: the run, its attempt, the step and the call's place in it. */
  invocationId(step: number, index: number): string;
  loadTranscript(): Promise<TranscriptEntry[]>;
  appendTranscript(entry: TranscriptEntry): Promise<void>;
  usage(): Promise<RunUsage>;
  /** One model call made (and one step taken), with its tokens and what it cost (micro-USD). */
  recordModelCall(usage: ModelUsage, costMicroUsd: number): Promise<void>;
  /** The cancel flag (set by REST, told through pub/sub); checked before every model and tool call. */
  cancelRequested(): Promise<boolean>;
  /** Records the call `started` (counting one tool call) unless the ledger knows it already; answers what it knows. */
  startInvocation(invocation: Invocation): Promise<InvocationState>;
  /** The watermark: from here on the effect may have happened and is never sent again. */
  markDispatched(invocation: Invocation): Promise<void>;
  completeInvocation(invocation: Invocation, outcome: ToolOutcome): Promise<void>;
  /**
   * ADR-0177: marks the run's outcome unverified for good (the run view shows it, whatever its end),
   * with the call's last acquisition error: its stable code and its message, which carries no secret.
   */
  markUnverified?(invocation: Invocation, error: { code: string; message: string }): Promise<void>;
  /** The loop breaker's stored state (ADR-0130 d7): never an evidence key, only digests of them. */
  loadBreakerState?(): Promise<unknown>;
  saveBreakerState?(state: unknown): Promise<void>;
}

/** What a tool needs from the platform before it runs. */
export interface ToolPolicy {
  /**
   * An approval is needed unless a live grant covers the call (then one use of the grant is taken,
   * once per invocation: a call resumed after a crash is not charged again).
   */
  needsApproval(invocation: Invocation): Promise<boolean>;
  /** Writes a pending approval and parks the run in one step; returns the approval id. */
  park(invocation: Invocation): Promise<string>;
  /**
   * `agent.delegate`, where the run may delegate: starts (or finds) the call's child run and either
   * moves this run to `waiting_child` on it, or answers the child's end if it has one already.
   */
  delegate?(invocation: Invocation): Promise<DelegateStep>;
}

export interface ToolExecutor {
  definitions(): readonly ToolDefinition[];
  /**
   * The evidence key of the last call's successful result, handed over once (ADR-0130 d7): the
   * platform's own, never part of the result the model reads or the ledger stores.
   */
  takeEvidenceKey?(): string | null;
  /** Runs one call. Effects call `beforeDispatch` right before anything leaves. */
  execute(
    call: ToolCall,
    context: {
      invocationId: string;
      deadlineMs: number;
      signal: AbortSignal;
      beforeDispatch: () => Promise<void>;
    },
  ): Promise<ToolOutcome>;
}

export type ExecutionEnd =
  | { kind: 'succeeded'; answer: string }
  | {
      kind: 'failed';
      /** A failure reason, or the code of the tool whose failure ended the run (issue 12). */
      code: RunErrorCode;
      detail: string;
      /**
       * The run's step index where it failed: the model turn, counted from 1 — a tool failure
       * names its invocation's step, a failure before or during a model call the turn being asked
       * for (the turns in the transcript + 1). A script's step N is turn N.
       */
      step?: number;
    }
  | { kind: 'parked'; approvalId: string }
  | { kind: 'waiting_child'; childRunId: string }
  | { kind: 'cancelled' };

export interface RunLoopOptions {
  run: RunPort;
  model: Model;
  tools: ToolExecutor;
  policy: ToolPolicy;
  limits: RunLimits;
  /** The run's deadline (epoch ms). */
  deadlineMs: number;
  /** Aborted when the worker shuts down or the run is cancelled. */
  signal: AbortSignal;
  /** Longest one tool call may take (its own deadline, inside the run's). */
  toolTimeoutMs?: number;
  clock?: () => number;
  /** The model's prices (ADR-0130 d1); with `costLimits`, each call is checked before and after. */
  price?: ModelPrice;
  costLimits?: CostLimits;
  /** Identical calls without new evidence fail the run `loop_detected` (ADR-0130 d7). */
  breaker?: LoopBreaker;
  /** Tools the plan must define ahead of all others (a bound session's browser tools: ADR-0130 d4). */
  requiredTools?: readonly string[];
  /** Most tool definitions sent to the model; the rest are reachable through `tool.call`. */
  definitionCap?: number;
  /** The agent's instructions, sent with every model call. */
  instructions?: string;
  /** Platform-trusted rows outside the cached prefix (`browser_origins=…`: ADR-0130 d9). */
  runtimeMetadata?: Readonly<Record<string, string>>;
  /**
   * Issue 11 (passwords): seals a call's secret arguments into its transcript entry, so a call
   * parked on its approval can still be dispatched with its real text by a later execution.
   * Without it they are held in this execution's memory only.
   */
  argumentSealer?: ArgumentSealer;
}

/** Tool definitions per request, the two meta-tools included when the index is used. */
export const DEFAULT_DEFINITION_CAP = 64;

const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

/** The execution stopped because its signal aborted (the worker is shutting down): hand the run back. */
export class ExecutionInterrupted extends Error {
  override readonly name = 'ExecutionInterrupted';
}

function throwIfAborted(signal: AbortSignal): void {
  if (signal.aborted) throw new ExecutionInterrupted('the execution was interrupted before its next call');
}

/**
 * One execution of a run (DESIGN §4.3): check limits → model call → record usage → for each tool
 * call: ledger, approval, dispatch → repeat, until an answer, a park, a failure or a cancel. A
 * resumed execution first answers the tool calls its last model turn left open; the ledger makes
 * that safe: a call recorded `dispatched` is never sent again, it becomes `outcome_unknown`.
 */
export async function runExecution(options: RunLoopOptions): Promise<ExecutionEnd> {
  const { run, model, tools, limits } = options;
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
    throwIfAborted(options.signal);
    if (await run.cancelRequested()) return { kind: 'cancelled' };
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
    const toolsAllowed = verdict.toolsAllowed && (costVerdict?.toolsAllowed ?? true);
    let response: Awaited<ReturnType<Model['call']>>;
    try {
      response = await model.call(
        {
          transcript,
          tools: toolsAllowed ? context.plan.defined : [],
          ...(options.instructions !== undefined ? { instructions: options.instructions } : {}),
          ...(options.runtimeMetadata ? { runtimeMetadata: options.runtimeMetadata } : {}),
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
      throwIfAborted(options.signal);
      if (error instanceof ModelError) {
        const billed = error.usage;
        const billedCost = billed && options.price ? callCostMicroUsd(options.price, billed) : 0;
        if (billed) await run.recordModelCall(billed, billedCost);
        if (error instanceof ModelBudgetExceeded)
          return { kind: 'failed', code: 'budget_exceeded', detail: error.message, step };
        // ADR-0130 d1: usage is checked again when it is recorded, a failed call's billed attempts too.
        const crossed =
          options.price && options.costLimits
            ? checkCostAfterCall(options.costLimits, spentMicroUsd + billedCost, options.price)
            : undefined;
        if (crossed && !crossed.ok)
          return { kind: 'failed', code: crossed.reason, detail: crossed.detail, step };
        const late = clock() >= options.deadlineMs;
        return late
          ? {
              kind: 'failed',
              code: 'deadline_exceeded',
              detail: 'the run passed its deadline during a model call',
              step,
            }
          : { kind: 'failed', code: 'model_error', detail: error.message, step };
      }
      throw error;
    }
    const callCost = options.price ? callCostMicroUsd(options.price, response.usage) : 0;
    const refusal = budgetRefusal(
      options,
      verdict,
      spentMicroUsd + callCost,
      response.toolCalls.length,
      step,
    );
    if (refusal) {
      await run.recordModelCall(response.usage, callCost);
      return refusal;
    }
    // Issue 11: secret arguments are recorded as `[secret]`; only the dispatched call carries them.
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
    // Sent back to back, in this order, on one connection: one round trip, the same order as two.
    await Promise.all([run.recordModelCall(response.usage, callCost), run.appendTranscript(entry)]);
    if (response.failedStep) {
      // Issue 12: a step that could not name its call fails the run with its code, at this turn,
      // unless it may fail; then the turn is spent and the script goes on.
      if (response.failedStep.mayFail) continue;
      return { kind: 'failed', code: response.failedStep.code, detail: response.failedStep.message, step };
    }
    if (response.toolCalls.length === 0) return { kind: 'succeeded', answer: response.answer ?? '' };
  }
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

/** What one execution keeps beside its transcript: the tool plan, and whether the breaker was restored. */
interface LoopContext {
  plan: RosterPlan;
  breakerLoaded: boolean;
  /** Issue 11: the secret arguments of calls this execution's model asked for, by call id. */
  secrets: Map<string, Record<string, string>>;
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
 * The call as it is dispatched: a call whose turn recorded secret arguments gets their real values
 * back, from this execution's memory or from the sealed blob of its turn (a call resumed after its
 * approval). Undefined when they are held nowhere any more: the call is never sent with the marker.
 */
function dispatchedCall(
  call: ToolCall,
  transcript: readonly TranscriptEntry[],
  options: RunLoopOptions,
  context: LoopContext,
): ToolCall | undefined {
  const turn = transcript.findLast((entry) => entry.kind === 'model');
  const blob = turn?.kind === 'model' ? turn.sealedArgs?.[call.id] : undefined;
  if (blob === undefined) return call;
  const values =
    context.secrets.get(call.id) ?? (blob ? options.argumentSealer?.unseal(call.id, blob) : undefined);
  return values ? revealCall(call, values) : undefined;
}

async function answerToolCalls(
  calls: Array<{ call: ToolCall; index: number }>,
  step: number,
  transcript: TranscriptEntry[],
  options: RunLoopOptions,
  clock: () => number,
  context: LoopContext,
): Promise<ExecutionEnd | undefined> {
  const { run, tools, policy, limits, breaker } = options;
  const answer = async (call: ToolCall, outcome: ToolOutcome) => {
    const entry: TranscriptEntry = { kind: 'tool', callId: call.id, name: call.name, outcome };
    transcript.push(entry);
    await run.appendTranscript(entry);
  };
  // Issue 12: whether this call's failure ends the run (RUN_ERROR_TABLE), told after its result is
  // written, so the transcript and ledger hold the failure the run's error names.
  const endedBy = (call: ToolCall, outcome: ToolOutcome): ExecutionEnd | undefined => {
    if (outcome.ok) return undefined;
    const verdict = toolFailureEnd(outcome.code, {
      scripted: options.model.scripted === true,
      mayFail: call.mayFail === true,
    });
    if (!verdict.ends) return undefined;
    const detail = verdict.code === outcome.code ? outcome.message : `${outcome.code}: ${outcome.message}`;
    return { kind: 'failed', code: verdict.code, detail, step };
  };
  const usage = await run.usage();
  const { run: batch, skipped } = fitBatch(limits, usage, calls);
  if (breaker && !context.breakerLoaded && batch.length > 0) {
    // The breaker carries over from the run's earlier executions (a park, a crash).
    const stored = await run.loadBreakerState?.();
    if (stored !== undefined && stored !== null) breaker.restoreFrom(stored);
    context.breakerLoaded = true;
  }
  const saveBreaker = async () => {
    if (breaker) await run.saveBreakerState?.(breaker.snapshot());
  };

  for (const { call: asked, index } of batch) {
    throwIfAborted(options.signal);
    if (await run.cancelRequested()) return { kind: 'cancelled' };
    // A deferred tool is called through `tool.call`; the call it names is the one that runs and counts.
    const deferred = asked.name === TOOL_CALL_NAME ? resolveDeferredCall(context.plan, asked) : undefined;
    if (deferred && !deferred.ok) {
      const outcome: ToolOutcome = { ok: false, code: deferred.code, message: deferred.message };
      await answer(asked, outcome);
      const end = endedBy(asked, outcome);
      if (end) return end;
      continue;
    }
    const call = deferred?.call ?? asked;
    if (call.name === TOOL_SEARCH_NAME) {
      const query = typeof call.args.query === 'string' ? call.args.query : '';
      const found = searchDeferredTools(context.plan, query).map(({ name, description, parameters }) => ({
        name,
        description,
        parameters,
      }));
      await answer(asked, { ok: true, result: { tools: found } });
      continue;
    }
    const invocation: Invocation = { id: run.invocationId(step, index), step, index, call };
    const invocationId = invocation.id;
    const known = await run.startInvocation(invocation);
    switch (known.state) {
      case 'completed': {
        breaker?.recordReplayed(invocation);
        await answer(asked, known.outcome);
        const end = endedBy(asked, known.outcome);
        if (end) return end;
        continue;
      }
      case 'dispatched':
      case 'outcome_unknown': {
        breaker?.recordReplayed(invocation);
        // The effect may have happened before a crash: never send it again.
        const outcome: ToolOutcome = {
          ok: false,
          code: 'outcome_unknown',
          message: 'the call was dispatched before the run was interrupted; its effect is unknown',
        };
        await run.completeInvocation(invocation, outcome);
        await answer(asked, outcome);
        const end = endedBy(asked, outcome);
        if (end) return end;
        continue;
      }
      case 'denied': {
        const outcome: ToolOutcome = { ok: false, code: 'approval_denied', message: known.message };
        await run.completeInvocation(invocation, outcome);
        await answer(asked, outcome);
        const end = endedBy(asked, outcome);
        if (end) return end;
        continue;
      }
      case 'awaiting_approval':
        return { kind: 'parked', approvalId: known.approvalId };
      case 'new':
      case 'started': {
        const admitted = admit(breaker, invocation);
        if (admitted) {
          await saveBreaker();
          return admitted;
        }
        if (call.name === DELEGATE_TOOL_NAME) {
          // Saved while the run is still this worker's: delegating may move it to waiting_child.
          await saveBreaker();
          const delegated: DelegateStep = policy.delegate
            ? await policy.delegate(invocation)
            : {
                kind: 'ended',
                outcome: { ok: false, code: 'invalid_arguments', message: 'this run may not delegate' },
              };
          if (delegated.kind === 'waiting')
            return { kind: 'waiting_child', childRunId: delegated.childRunId };
          await run.completeInvocation(invocation, delegated.outcome);
          breaker?.complete(invocation, null);
          await saveBreaker();
          await answer(asked, delegated.outcome);
          const end = endedBy(asked, delegated.outcome);
          if (end) return end;
          continue;
        }
        if (await policy.needsApproval(invocation)) {
          await saveBreaker();
          return { kind: 'parked', approvalId: await policy.park(invocation) };
        }
        break;
      }
      case 'approved': {
        const admitted = admit(breaker, invocation);
        if (admitted) return admitted;
        break;
      }
      default:
        return assertNever(known, 'invocation state');
    }
    const deadlineMs = Math.min(
      options.deadlineMs,
      clock() + (options.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS),
    );
    const sent = dispatchedCall(call, transcript, options, context);
    const outcome: ToolOutcome = sent
      ? await tools.execute(sent, {
          invocationId,
          deadlineMs,
          signal: options.signal,
          beforeDispatch: () => run.markDispatched(invocation),
        })
      : {
          ok: false,
          code: 'invalid_arguments',
          message: 'the secret text of this call is held no more; ask for the call again',
        };
    // ADR-0130 d7: the evidence key goes to the breaker only, never into what is stored.
    const evidenceKey = tools.takeEvidenceKey?.() ?? null;
    breaker?.complete(invocation, outcome.ok ? evidenceKey : null);
    // Ledger, breaker, transcript: sent back to back in this order, one round trip. A crash between
    // them leaves the same prefix written as one after another would.
    await Promise.all([run.completeInvocation(invocation, outcome), saveBreaker(), answer(asked, outcome)]);
    if (!outcome.ok && outcome.unverified)
      await run.markUnverified?.(invocation, { code: outcome.code, message: outcome.message });
    const end = endedBy(asked, outcome);
    if (end) return end;
  }
  for (const { call } of skipped) {
    await answer(call, {
      ok: false,
      code: 'budget_exceeded',
      message: 'no tool calls left in this run; answer now',
    });
  }
  return undefined;
}

/** The breaker's refusal of a call about to be sent (the fifth identical one), as the run's end. */
function admit(breaker: LoopBreaker | undefined, invocation: Invocation): ExecutionEnd | undefined {
  const verdict = breaker?.admit(invocation);
  if (!verdict || verdict.ok) return undefined;
  return { kind: 'failed', code: verdict.reason, detail: verdict.detail, step: invocation.step };
}
