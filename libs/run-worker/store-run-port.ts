import { z } from 'zod';
import { modelStepId, type RunView, toolStepId } from '../contracts/index.js';
import type { DispatchedEffect } from '../provider/index.js';
import type {
  Invocation,
  InvocationState,
  ModelUsage,
  RunPort,
  ToolOutcome,
  TranscriptEntry,
} from '../runtime/index.js';
import type { StepWrite } from '../runtime/loop-ports.js';
import type { RunStore } from '../store/index.js';
import { TranscriptWriteRefused } from '../store/run-transcript.js';
import type { ExecutionDeps } from './execution-deps.js';
import { RunLost, refusedUnlessOk } from './run-lost.js';

/** The run as the loop sees it, over the run store; every write carries this worker's owner token. */
export class StoreRunPort implements RunPort {
  #current: RunView;
  #unwrittenInput: TranscriptEntry | undefined;
  #checkedOnce = false;
  /** The holder of a takeover asked of the run, as the last check read it. */
  #takeoverBy: string | undefined;

  #knownEmpty: boolean;

  constructor(
    private readonly deps: ExecutionDeps,
    private readonly run: RunView,
    private readonly ownerToken: string,
    claimed: { transcriptEmpty?: boolean } = {},
  ) {
    this.#current = run;
    this.#knownEmpty = claimed.transcriptEmpty === true;
  }

  get runId(): string {
    return this.run.id;
  }

  /** As the run store names ledger entries: a retried run's calls never meet the first attempt's. */
  invocationId(step: number, index: number): string {
    return `${this.run.id}-a${this.run.attempt}-s${step}-i${index}`;
  }

  async loadTranscript(): Promise<TranscriptEntry[]> {
    await this.deps.faults?.('transcript.load');
    // The claim counted the transcript; empty then, it is empty until this owner
    // writes it, so the first load need not ask. Any later load reads.
    const knownEmpty = this.#knownEmpty;
    this.#knownEmpty = false;
    const entries = knownEmpty ? [] : await this.deps.transcripts.load<TranscriptEntry>(this.run.id);
    if (entries.length > 0) return entries;
    const input = this.run.input as { text?: string } | string;
    const first: TranscriptEntry = {
      kind: 'input',
      text: typeof input === 'string' ? input : (input.text ?? ''),
    };
    // Written with the first model turn, in the same round trip: a run that crashes before it
    // starts again from its input anyway.
    this.#unwrittenInput = first;
    return [first];
  }

  async appendTranscript(entry: TranscriptEntry): Promise<void> {
    this.#knownEmpty = false;
    const entries = this.#unwrittenInput ? [this.#unwrittenInput, entry] : [entry];
    await this.deps.faults?.('transcript.append');
    try {
      await this.deps.transcripts.append(this.run.id, this.ownerToken, ...entries);
    } catch (error) {
      // Refused as not the owner, the run is another worker's now: lost, not a fault.
      if (error instanceof TranscriptWriteRefused && error.code === 'not_owner')
        throw new RunLost(`transcript: ${error.message}`);
      throw error;
    }
    this.#unwrittenInput = undefined;
  }

  /** Usage as this owner last wrote it: only the owner adds to it, so no read is needed. */
  async usage() {
    const { usage } = this.#current;
    return {
      steps: usage.steps,
      modelCalls: usage.model_calls,
      toolCalls: usage.tool_calls,
      costMicroUsd: usage.cost_micro_usd,
    };
  }

  async #addUsage(delta: Parameters<RunStore['addUsage']>[2]): Promise<void> {
    await this.deps.faults?.('usage.add');
    const added = await this.deps.store.addUsage(this.run.id, this.ownerToken, delta);
    if (!added.ok) throw new RunLost(`usage: ${added.message}`);
    this.#current = added.run;
  }

  recordModelCall(_usage: ModelUsage, costMicroUsd: number): Promise<void> {
    return this.#addUsage({ steps: 1, model_calls: 1, cost_micro_usd: costMicroUsd });
  }

  /** The step under its stable id; refused as not the owner, the run was lost. */
  async recordStep(write: StepWrite): Promise<void> {
    const { onlyIfAbsent, eventOutcome, ...step } = write;
    const { id: runId, attempt } = this.run;
    const id =
      step.kind === 'model'
        ? modelStepId(attempt, step.turn)
        : toolStepId(attempt, step.turn, step.index ?? 0);
    await this.deps.faults?.('step.record');
    const written = await this.deps.store.recordStep(
      this.ownerToken,
      { ...step, id, run_id: runId, attempt },
      { ...(onlyIfAbsent ? { onlyIfAbsent } : {}), ...(eventOutcome ? { eventOutcome } : {}) },
    );
    // A parked call's mark met its approval decided, or the run cancelled, first: the next
    // execution writes the step on (or the run has ended), so nothing is lost by dropping it.
    if (!written.ok && step.status === 'waiting_approval') return;
    refusedUnlessOk(written, 'step');
  }

  async loadBreakerState(): Promise<unknown> {
    await this.deps.faults?.('loop_state.load');
    return this.deps.store.loadLoopState(this.run.id);
  }

  async saveBreakerState(state: unknown): Promise<void> {
    await this.deps.faults?.('loop_state.save');
    refusedUnlessOk(await this.deps.store.saveLoopState(this.run.id, this.ownerToken, state), 'loop state');
  }

  async cancelRequested(): Promise<boolean> {
    await this.deps.faults?.('cancel.check');
    if (this.deps.cancelsHeard?.has(this.run.id)) return true;
    // The first check comes right after the claim, whose record carries the flag: no read needed.
    // A cancel asked since then was published, and this process heard it (above).
    if (!this.#checkedOnce) {
      this.#checkedOnce = true;
      return this.run.cancel_requested;
    }
    const { stop, takeoverBy } = await this.deps.store.interruptions(this.run.id);
    this.#takeoverBy = takeoverBy;
    return stop;
  }

  takeoverRequested(): string | undefined {
    return this.#takeoverBy;
  }

  async startInvocation(invocation: Invocation): Promise<InvocationState> {
    await this.deps.faults?.('invocation.start');
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: 'started',
    });
    refusedUnlessOk(recorded, 'ledger');
    const entry = recorded.entry;
    // An approval is only ever asked for a call already in the ledger: a new one has none.
    if (recorded.code === 'recorded') {
      // The ledger's script counted the tool call; this owner's view of usage follows it.
      const { usage } = this.#current;
      this.#current = { ...this.#current, usage: { ...usage, tool_calls: usage.tool_calls + 1 } };
      return { state: 'new' };
    }
    const approvals = await this.deps.store.listApprovals(this.run.id);
    const approval = approvals.filter((candidate) => candidate.invocation_id === invocation.id).at(-1);
    switch (entry?.state) {
      case 'dispatched': {
        const effect = dispatchedEffectOf(entry.result);
        return effect ? { state: 'dispatched', effect } : { state: 'dispatched' };
      }
      case 'outcome_unknown':
        return { state: 'outcome_unknown' };
      case 'completed':
        return { state: 'completed', outcome: entry.result as ToolOutcome };
      default:
        break;
    }
    if (approval?.status === 'pending') return { state: 'awaiting_approval', approvalId: approval.id };
    if (approval?.status === 'approved') return { state: 'approved', approvalId: approval.id };
    if (approval?.status === 'denied')
      return { state: 'denied', message: approval.reason ?? 'denied by the owner', approvalId: approval.id };
    return { state: 'started' };
  }

  async markDispatched(invocation: Invocation, effect?: DispatchedEffect): Promise<void> {
    await this.deps.faults?.('invocation.dispatch');
    await this.deps.lockGuard?.beforeDispatch();
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: 'dispatched',
      // Replaced by the call's outcome when it completes; read only by a next owner before that.
      ...(effect ? { result: { effect: { lease_id: effect.leaseId, sequence: effect.sequence } } } : {}),
    });
    refusedUnlessOk(recorded, 'ledger');
  }

  async mayAnswer(): Promise<void> {
    await this.deps.lockGuard?.beforeAnswer();
  }

  async completeInvocation(invocation: Invocation, outcome: ToolOutcome): Promise<void> {
    await this.deps.faults?.('invocation.complete');
    const recorded = await this.deps.store.recordInvocation(this.run.id, this.ownerToken, {
      step: invocation.step,
      index: invocation.index,
      tool: invocation.call.name,
      state: !outcome.ok && outcome.code === 'outcome_unknown' ? 'outcome_unknown' : 'completed',
      result: outcome,
    });
    refusedUnlessOk(recorded, 'ledger');
  }

  async markUnverified(invocation: Invocation, error: { code: string; message: string }): Promise<void> {
    const marked = await this.deps.store.markUnverified(this.run.id, this.ownerToken, {
      invocation_id: invocation.id,
      ...error,
    });
    if (!marked.ok) throw new RunLost(`unverified mark: ${marked.message}`);
    this.#current = marked.run;
  }
}

const dispatchedEffectSchema = z.object({
  effect: z.object({ lease_id: z.string().min(1), sequence: z.number().int().min(1) }),
});

/** The lease and sequence a dispatched browser effect went out on, as its ledger entry keeps them. */
function dispatchedEffectOf(result: unknown): DispatchedEffect | undefined {
  const parsed = dispatchedEffectSchema.safeParse(result);
  return parsed.success
    ? { leaseId: parsed.data.effect.lease_id, sequence: parsed.data.effect.sequence }
    : undefined;
}
