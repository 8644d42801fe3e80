import { assertNever, REQUEST_PERSON_TOOL, toolFailureEnd } from '../contracts/index.js';
import { DELEGATE_TOOL_NAME, type DelegateStep } from './delegation.js';
import type {
  ExecutionEnd,
  Invocation,
  InvocationState,
  LoopContext,
  RunLoopOptions,
  ToolRun,
} from './loop-ports.js';
import type { ToolCall, ToolOutcome, TranscriptEntry } from './model.js';
import { observedTarget } from './observed-target.js';
import { answerPersonRequest } from './person-turn.js';
import { resolveDeferredCall, searchDeferredTools, TOOL_CALL_NAME, TOOL_SEARCH_NAME } from './roster.js';
import { revealCall, typedSecretValues } from './secret-args.js';
import { ToolStepWriter } from './step-writers.js';
import { performCall } from './tool-run.js';

/**
 * One tool call answered as a chain of small steps over one context, in the manner of Temporal's
 * interceptors: ledger replay → breaker → delegation → approval → a person's request → dispatch →
 * record. Each step either settles the call (its answer written, or the execution's end) or hands
 * it on; what a step learns travels in what it returns, never through state left on the executor.
 */

const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

/** What every call of one model turn shares: the run's options, its clock, the transcript answers join. */
export interface TurnContext {
  readonly options: RunLoopOptions;
  readonly clock: () => number;
  readonly transcript: TranscriptEntry[];
  readonly loop: LoopContext;
  /** The model turn whose calls these are. */
  readonly step: number;
}

/** One call's execution context, handed from step to step. */
export interface CallContext extends TurnContext {
  /** The call as the model asked it: the transcript's answer is this one's. */
  readonly asked: ToolCall;
  /** The call that runs and counts: the one a `tool.call` names, or the asked one. */
  readonly call: ToolCall;
  readonly invocation: Invocation;
  readonly steps: ToolStepWriter;
  /** What the ledger knew of the call when this execution started it. */
  readonly known: InvocationState;
}

/** A step's decision: the call is answered (everywhere it is kept), or the execution ends here. */
export type Settled = { kind: 'answered'; outcome: ToolOutcome } | { kind: 'ended'; end: ExecutionEnd };

/** A step of the chain: undefined hands the call to the next step. */
export type ChainStep = (context: CallContext) => Promise<Settled | undefined>;

/** What the dispatch step answers: the executor's run of the call, and how long it took. */
export interface Dispatched extends ToolRun {
  durationMs: number;
}

const answered = (outcome: ToolOutcome): Settled => ({ kind: 'answered', outcome });
const ended = (end: ExecutionEnd): Settled => ({ kind: 'ended', end });

/** The call's answer joins the transcript, in memory and in the store. */
export async function answer(turn: TurnContext, asked: ToolCall, outcome: ToolOutcome): Promise<void> {
  const entry: TranscriptEntry = { kind: 'tool', callId: asked.id, name: asked.name, outcome };
  turn.transcript.push(entry);
  await turn.options.run.appendTranscript(entry);
}

async function saveBreaker({ options }: TurnContext): Promise<void> {
  if (options.breaker) await options.run.saveBreakerState?.(options.breaker.snapshot());
}

/** The step record of a call, named as the ledger names it. */
export function stepWriterOf(turn: TurnContext, named: ToolCall, index: number): ToolStepWriter {
  const { options, clock, transcript, loop, step } = turn;
  return new ToolStepWriter(
    options.run,
    clock,
    step,
    index,
    named,
    options.run.invocationId(step, index),
    () => typedSecretValues(transcript, loop.secrets, options.argumentSealer),
    () => observedTarget(transcript, named)?.element ?? null,
  );
}

/**
 * Whether a call's failure ends the run (RUN_ERROR_TABLE), told after its result is written, so
 * the transcript and ledger hold the failure the run's error names.
 */
export function endedBy(turn: TurnContext, asked: ToolCall, outcome: ToolOutcome): ExecutionEnd | undefined {
  if (outcome.ok) return undefined;
  const verdict = toolFailureEnd(outcome.code, {
    scripted: turn.options.model.scripted === true,
    mayFail: asked.mayFail === true,
  });
  if (!verdict.ends) return undefined;
  const detail = verdict.code === outcome.code ? outcome.message : `${outcome.code}: ${outcome.message}`;
  return { kind: 'failed', code: verdict.code, detail, step: turn.step };
}

/**
 * Before the ledger: a deferred tool is called through `tool.call`, and the call it names is the
 * one that runs and counts; a `tool.call` naming nothing it may call, and `tool.search`, are
 * answered here and never reach the ledger.
 */
export async function resolveFromRoster(
  turn: TurnContext,
  asked: ToolCall,
  index: number,
): Promise<{ call: ToolCall } | { settled: Settled }> {
  const deferred = asked.name === TOOL_CALL_NAME ? resolveDeferredCall(turn.loop.plan, asked) : undefined;
  if (deferred && !deferred.ok) {
    const outcome: ToolOutcome = { ok: false, code: deferred.code, message: deferred.message };
    await Promise.all([answer(turn, asked, outcome), stepWriterOf(turn, asked, index).ended(outcome, null)]);
    return { settled: answered(outcome) };
  }
  const call = deferred?.call ?? asked;
  if (call.name !== TOOL_SEARCH_NAME) return { call };
  const query = typeof call.args.query === 'string' ? call.args.query : '';
  const found = searchDeferredTools(turn.loop.plan, query).map(({ name, description, parameters }) => ({
    name,
    description,
    parameters,
  }));
  const outcome: ToolOutcome = { ok: true, result: { tools: found } };
  await Promise.all([answer(turn, asked, outcome), stepWriterOf(turn, call, index).ended(outcome, null)]);
  return { settled: answered(outcome) };
}

/**
 * Ledger replay: a call the ledger knows the end of is answered from it; one sent before is never
 * sent again; one waiting on its approval parks the run; one denied is answered so. A call
 * approved goes on with its approval's id on its step.
 */
export const replayFromLedger: ChainStep = async (context) => {
  const { known, invocation, steps, options, asked, call } = context;
  const { breaker, run, tools } = options;
  switch (known.state) {
    case 'completed':
      breaker?.recordReplayed(invocation);
      // An ended step stays as its execution wrote it; this one ends a step a crash left open.
      await Promise.all([
        answer(context, asked, replayed(known.outcome, call.name)),
        steps.ended(known.outcome, null),
      ]);
      return answered(known.outcome);
    case 'dispatched':
    case 'outcome_unknown': {
      breaker?.recordReplayed(invocation);
      // The effect may have happened before a crash or a stop: never send it again. Where the
      // lease recorded what became of it, that is its answer (ADR-0127 d3, amended).
      const learned =
        known.state === 'dispatched' && known.effect
          ? await tools.handedOver?.(call, known.effect, {
              invocationId: invocation.id,
              deadlineMs: toolDeadline(options, context.clock),
              signal: options.signal,
            })
          : undefined;
      const outcome: ToolOutcome = learned ?? {
        ok: false,
        code: 'outcome_unknown',
        message: 'the call was dispatched before the run was interrupted; its effect is unknown',
      };
      await run.completeInvocation(invocation, outcome);
      await Promise.all([answer(context, asked, outcome), steps.ended(outcome, null)]);
      return answered(outcome);
    }
    case 'denied': {
      const outcome: ToolOutcome = { ok: false, code: 'approval_denied', message: known.message };
      await run.completeInvocation(invocation, outcome);
      await Promise.all([
        answer(context, asked, outcome),
        steps.decidedBy(known.approvalId).ended(outcome, null),
      ]);
      return answered(outcome);
    }
    case 'awaiting_approval':
      return ended({ kind: 'parked', approvalId: known.approvalId });
    case 'approved':
      steps.decidedBy(known.approvalId);
      return undefined;
    case 'new':
    case 'started':
      return undefined;
    default:
      return assertNever(known, 'invocation state');
  }
};

/**
 * The breaker (ADR-0130 d7): the fifth identical call without new evidence ends the run before it
 * is sent; its step tells the refusal, and the breaker is saved as it stands.
 */
export const admitByBreaker: ChainStep = async (context) => {
  const verdict = context.options.breaker?.admit(context.invocation);
  if (!verdict || verdict.ok) return undefined;
  const end: ExecutionEnd = {
    kind: 'failed',
    code: verdict.reason,
    detail: verdict.detail,
    step: context.invocation.step,
  };
  await Promise.all([saveBreaker(context), context.steps.ended(refusedBy(end), null)]);
  return ended(end);
};

/**
 * `agent.delegate`, asked anew: starts (or finds) the child run and waits on it, or answers the
 * child's end where it has one; a run that may not delegate is told so.
 */
export const delegateToChild: ChainStep = async (context) => {
  const { call, known, options, invocation, clock, steps, asked } = context;
  if (call.name !== DELEGATE_TOOL_NAME || (known.state !== 'new' && known.state !== 'started'))
    return undefined;
  // Saved while the run is still this worker's: delegating may move it to waiting_child.
  await saveBreaker(context);
  const delegatedAtMs = clock();
  const delegated: DelegateStep = options.policy.delegate
    ? await options.policy.delegate(invocation)
    : {
        kind: 'ended',
        outcome: { ok: false, code: 'invalid_arguments', message: 'this run may not delegate' },
      };
  if (delegated.kind === 'waiting') return ended({ kind: 'waiting_child', childRunId: delegated.childRunId });
  await options.run.completeInvocation(invocation, delegated.outcome);
  options.breaker?.complete(invocation, null);
  await saveBreaker(context);
  await Promise.all([
    answer(context, asked, delegated.outcome),
    steps.ended(delegated.outcome, clock() - delegatedAtMs),
  ]);
  return answered(delegated.outcome);
};

/**
 * Approval: a call asked anew that needs one parks the run on a pending approval; a call its
 * approval let through runs now, and its step says so.
 */
export const awaitApproval: ChainStep = async (context) => {
  const { known, options, invocation, steps } = context;
  if (known.state === 'approved') {
    await steps.started();
    return undefined;
  }
  if (known.state !== 'new' && known.state !== 'started') return undefined;
  if (!(await options.policy.needsApproval(invocation))) return undefined;
  await saveBreaker(context);
  const approvalId = await options.policy.park(invocation);
  // After the park, which cleared the owner: the store lets this mark in for its approval.
  await steps.waitingApproval(approvalId);
  return ended({ kind: 'parked', approvalId });
};

/**
 * `browser.request_person`, approved: nothing is sent for it — the person has handed the page
 * back, and the model hears how it is.
 */
export const answerForPerson: ChainStep = async (context) => {
  const { known, call, clock, options, invocation, steps, asked } = context;
  if (known.state !== 'approved' || call.name !== REQUEST_PERSON_TOOL) return undefined;
  const askedAtMs = clock();
  const outcome = await answerPersonRequest(invocation, known.approvalId, options, clock);
  await options.run.completeInvocation(invocation, outcome);
  options.breaker?.complete(invocation, null);
  await Promise.all([
    saveBreaker(context),
    answer(context, asked, outcome),
    steps.ended(outcome, clock() - askedAtMs),
  ]);
  return answered(outcome);
};

/**
 * Dispatch: the call goes to its executor, with its secret arguments' real values, under its own
 * deadline; the ledger's watermark is set right before anything leaves. Answers the outcome with
 * the evidence key and artifacts the executor handed back with it.
 */
export async function dispatch(context: CallContext): Promise<Dispatched> {
  const { options, clock, invocation } = context;
  const deadlineMs = toolDeadline(options, clock);
  const sent = dispatchedCall(context);
  const executedAtMs = clock();
  const ran: ToolRun = sent
    ? await performCall(options.tools, sent, {
        invocationId: invocation.id,
        deadlineMs,
        signal: options.signal,
        beforeDispatch: (effect) => options.run.markDispatched(invocation, effect),
      })
    : {
        outcome: {
          ok: false,
          code: 'invalid_arguments',
          message: 'the secret text of this call is held no more; ask for the call again',
        },
        evidenceKey: null,
        artifacts: {},
      };
  return { ...ran, durationMs: clock() - executedAtMs };
}

/**
 * Record: the breaker learns the evidence, then the ledger, the breaker's state, the transcript
 * and the step are written together — none once the run may be another worker's.
 */
export async function record(context: CallContext, dispatched: Dispatched): Promise<Settled> {
  const { options, invocation, asked, steps } = context;
  const { outcome, evidenceKey, artifacts, durationMs } = dispatched;
  // ADR-0130 d7: the evidence key goes to the breaker only, never into what is stored.
  options.breaker?.complete(invocation, outcome.ok ? evidenceKey : null);
  await options.run.mayAnswer?.();
  // Sent back to back in this order, one round trip. A crash between them leaves the same prefix
  // written as one after another would.
  await Promise.all([
    options.run.completeInvocation(invocation, outcome),
    saveBreaker(context),
    answer(context, asked, outcome),
    steps.ended(outcome, durationMs, artifacts),
  ]);
  if (!outcome.ok && outcome.unverified)
    await options.run.markUnverified?.(invocation, { code: outcome.code, message: outcome.message });
  return answered(outcome);
}

/** The steps before dispatch, in their order; the first to settle the call ends the chain. */
export const BEFORE_DISPATCH: readonly ChainStep[] = Object.freeze([
  replayFromLedger,
  admitByBreaker,
  delegateToChild,
  awaitApproval,
  answerForPerson,
]);

/** Runs a started call through the chain: settled by a step before dispatch, or dispatched and recorded. */
export async function runChain(context: CallContext): Promise<Settled> {
  for (const step of BEFORE_DISPATCH) {
    const settled = await step(context);
    if (settled) return settled;
  }
  return record(context, await dispatch(context));
}

/** A tool call's deadline: its own timeout from now, inside the run's. */
function toolDeadline(options: RunLoopOptions, clock: () => number): number {
  return Math.min(options.deadlineMs, clock() + (options.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS));
}

/**
 * The call as it is dispatched: a call whose turn recorded secret arguments gets their real values
 * back, from this execution's memory or from the sealed blob of its turn (a call resumed after its
 * approval). Undefined when they are held nowhere any more: the call is never sent with the marker.
 */
function dispatchedCall({ call, transcript, options, loop }: CallContext): ToolCall | undefined {
  const turn = transcript.findLast((entry) => entry.kind === 'model');
  const blob = turn?.kind === 'model' ? turn.sealedArgs?.[call.id] : undefined;
  if (blob === undefined) return call;
  const values =
    loop.secrets.get(call.id) ?? (blob ? options.argumentSealer?.unseal(call.id, blob) : undefined);
  return values ? revealCall(call, values) : undefined;
}

/**
 * A completed call answered from the ledger (a crash came between its ledger and transcript
 * writes). The ledger keeps whether a browser call succeeded, not the page it saw, so
 * the answer tells the model to look again before acting on that page.
 */
function replayed(outcome: ToolOutcome, tool: string): ToolOutcome {
  if (!outcome.ok || !tool.startsWith('browser.')) return outcome;
  const result = outcome.result as { observation?: unknown } | undefined;
  if (result?.observation !== undefined) return outcome;
  return {
    ok: true,
    result: {
      ...(typeof result === 'object' && result !== null ? result : {}),
      note: 'this call completed before the run was interrupted and its page was not kept: observe the page before acting on it',
    },
  };
}

/** A refusal that ends the run before its call was sent, as the call's step tells it. */
function refusedBy(end: ExecutionEnd): ToolOutcome {
  return end.kind === 'failed'
    ? { ok: false, code: end.code, message: end.detail }
    : { ok: false, code: end.kind, message: 'the call was not sent' };
}
