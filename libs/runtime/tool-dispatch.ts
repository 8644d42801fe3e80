import { assertNever, REQUEST_PERSON_TOOL, toolFailureEnd } from '../contracts/index.js';
import type { LoopBreaker } from './breaker.js';
import { DELEGATE_TOOL_NAME, type DelegateStep } from './delegation.js';
import { throwIfAborted } from './execution-interrupted.js';
import { fitBatch } from './limits.js';
import type { ExecutionEnd, Invocation, LoopContext, RunLoopOptions } from './loop-ports.js';
import type { ToolCall, ToolOutcome, TranscriptEntry } from './model.js';
import { observedTarget } from './observed-target.js';
import { answerPersonRequest, pauseIfTakenOver } from './person-turn.js';
import { resolveDeferredCall, searchDeferredTools, TOOL_CALL_NAME, TOOL_SEARCH_NAME } from './roster.js';
import { revealCall, typedSecretValues } from './secret-args.js';
import { ToolStepWriter } from './step-writers.js';

const DEFAULT_TOOL_TIMEOUT_MS = 60_000;

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

/**
 * Answers the open tool calls of one model turn, in order: each through the ledger, the breaker,
 * approval or delegation, then dispatch. Answers the run's end, or undefined when every call of the
 * batch has its result and the loop goes on to the next model turn.
 */
export async function answerToolCalls(
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
  // Whether this call's failure ends the run (RUN_ERROR_TABLE), told after its result is
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
    throwIfAborted(options.signal, options.stopSignal);
    if (await run.cancelRequested()) return { kind: 'cancelled' };
    const paused = await pauseIfTakenOver(options);
    if (paused) return paused;
    // A deferred tool is called through `tool.call`; the call it names is the one that runs and counts.
    const deferred = asked.name === TOOL_CALL_NAME ? resolveDeferredCall(context.plan, asked) : undefined;
    // Each call is a step, written beside the writes already there (one round trip).
    const stepOf = (named: ToolCall) =>
      new ToolStepWriter(
        run,
        clock,
        step,
        index,
        named,
        run.invocationId(step, index),
        () => typedSecretValues(transcript, context.secrets, options.argumentSealer),
        () => observedTarget(transcript, named)?.element ?? null,
      );
    if (deferred && !deferred.ok) {
      const outcome: ToolOutcome = { ok: false, code: deferred.code, message: deferred.message };
      await Promise.all([answer(asked, outcome), stepOf(asked).ended(outcome, null)]);
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
      const outcome: ToolOutcome = { ok: true, result: { tools: found } };
      await Promise.all([answer(asked, outcome), stepOf(call).ended(outcome, null)]);
      continue;
    }
    const invocation: Invocation = { id: run.invocationId(step, index), step, index, call };
    const invocationId = invocation.id;
    const steps = stepOf(call);
    // `started` goes with the ledger's start; a step recorded already (a replay) is left as it is.
    const [known] = await Promise.all([run.startInvocation(invocation), steps.startedIfNew()]);
    switch (known.state) {
      case 'completed': {
        breaker?.recordReplayed(invocation);
        // An ended step stays as its execution wrote it; this one ends a step a crash left open.
        await Promise.all([
          answer(asked, replayed(known.outcome, call.name)),
          steps.ended(known.outcome, null),
        ]);
        const end = endedBy(asked, known.outcome);
        if (end) return end;
        continue;
      }
      case 'dispatched':
      case 'outcome_unknown': {
        breaker?.recordReplayed(invocation);
        // The effect may have happened before a crash or a stop: never send it again. Where the
        // lease recorded what became of it, that is its answer (ADR-0127 d3, amended).
        const learned =
          known.state === 'dispatched' && known.effect
            ? await tools.handedOver?.(call, known.effect, {
                invocationId,
                deadlineMs: toolDeadline(options, clock),
                signal: options.signal,
              })
            : undefined;
        const outcome: ToolOutcome = learned ?? {
          ok: false,
          code: 'outcome_unknown',
          message: 'the call was dispatched before the run was interrupted; its effect is unknown',
        };
        await run.completeInvocation(invocation, outcome);
        await Promise.all([answer(asked, outcome), steps.ended(outcome, null, tools.takeArtifacts?.())]);
        const end = endedBy(asked, outcome);
        if (end) return end;
        continue;
      }
      case 'denied': {
        const outcome: ToolOutcome = { ok: false, code: 'approval_denied', message: known.message };
        await run.completeInvocation(invocation, outcome);
        await Promise.all([answer(asked, outcome), steps.decidedBy(known.approvalId).ended(outcome, null)]);
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
          await Promise.all([saveBreaker(), steps.ended(refusedBy(admitted), null)]);
          return admitted;
        }
        if (call.name === DELEGATE_TOOL_NAME) {
          // Saved while the run is still this worker's: delegating may move it to waiting_child.
          await saveBreaker();
          const delegatedAtMs = clock();
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
          await Promise.all([
            answer(asked, delegated.outcome),
            steps.ended(delegated.outcome, clock() - delegatedAtMs),
          ]);
          const end = endedBy(asked, delegated.outcome);
          if (end) return end;
          continue;
        }
        if (await policy.needsApproval(invocation)) {
          await saveBreaker();
          const approvalId = await policy.park(invocation);
          // After the park, which cleared the owner: the store lets this mark in for its approval.
          await steps.waitingApproval(approvalId);
          return { kind: 'parked', approvalId };
        }
        break;
      }
      case 'approved': {
        steps.decidedBy(known.approvalId);
        const admitted = admit(breaker, invocation);
        if (admitted) {
          await steps.ended(refusedBy(admitted), null);
          return admitted;
        }
        // Let through by its approval, the call runs now: its step says so.
        await steps.started();
        if (call.name === REQUEST_PERSON_TOOL) {
          // Nothing is sent for it: the person has handed the page back; the model hears how it is.
          const askedAtMs = clock();
          const outcome = await answerPersonRequest(invocation, known.approvalId, options, clock);
          await run.completeInvocation(invocation, outcome);
          breaker?.complete(invocation, null);
          await Promise.all([
            saveBreaker(),
            answer(asked, outcome),
            steps.ended(outcome, clock() - askedAtMs),
          ]);
          continue;
        }
        break;
      }
      default:
        return assertNever(known, 'invocation state');
    }
    const deadlineMs = toolDeadline(options, clock);
    const sent = dispatchedCall(call, transcript, options, context);
    const executedAtMs = clock();
    const outcome: ToolOutcome = sent
      ? await tools.execute(sent, {
          invocationId,
          deadlineMs,
          signal: options.signal,
          beforeDispatch: (effect) => run.markDispatched(invocation, effect),
        })
      : {
          ok: false,
          code: 'invalid_arguments',
          message: 'the secret text of this call is held no more; ask for the call again',
        };
    // ADR-0130 d7: the evidence key goes to the breaker only, never into what is stored.
    const evidenceKey = tools.takeEvidenceKey?.() ?? null;
    const durationMs = clock() - executedAtMs;
    // The settled page's screenshot, by name; handed over once, like the evidence key.
    const artifacts = tools.takeArtifacts?.();
    breaker?.complete(invocation, outcome.ok ? evidenceKey : null);
    // Before any of the answer's writes, which go out together: none once the run may be another's.
    await run.mayAnswer?.();
    // Ledger, breaker, transcript, step: sent back to back in this order, one round trip. A crash
    // between them leaves the same prefix written as one after another would.
    await Promise.all([
      run.completeInvocation(invocation, outcome),
      saveBreaker(),
      answer(asked, outcome),
      steps.ended(outcome, durationMs, artifacts),
    ]);
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

/** A tool call's deadline: its own timeout from now, inside the run's. */
function toolDeadline(options: RunLoopOptions, clock: () => number): number {
  return Math.min(options.deadlineMs, clock() + (options.toolTimeoutMs ?? DEFAULT_TOOL_TIMEOUT_MS));
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

/** The breaker's refusal of a call about to be sent (the fifth identical one), as the run's end. */
function admit(breaker: LoopBreaker | undefined, invocation: Invocation): ExecutionEnd | undefined {
  const verdict = breaker?.admit(invocation);
  if (!verdict || verdict.ok) return undefined;
  return { kind: 'failed', code: verdict.reason, detail: verdict.detail, step: invocation.step };
}
