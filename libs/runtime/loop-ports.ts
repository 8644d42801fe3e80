import type {
  OutputValidator,
  PageArtifacts,
  RunErrorCode,
  RunStep,
  StepOutcome,
} from '../contracts/index.js';
import type { DispatchedEffect } from '../provider/index.js';
import type { LoopBreaker } from './breaker.js';
import type { CostLimits, ModelPrice } from './cost.js';
import type { DelegateStep } from './delegation.js';
import type { RunLimits, RunUsage } from './limits.js';
import type { Model, ModelUsage, ToolCall, ToolDefinition, ToolOutcome, TranscriptEntry } from './model.js';
import type { RosterPlan } from './roster.js';
import type { ArgumentSealer } from './secret-args.js';

/** A tool call's durable state in the run's ledger (DESIGN §3). */
export type InvocationState =
  | { state: 'new' }
  | { state: 'started' }
  | { state: 'awaiting_approval'; approvalId: string }
  | { state: 'approved'; approvalId?: string }
  | { state: 'denied'; message: string; approvalId?: string }
  /** `effect`: the lease and sequence a browser effect went out on, when the ledger has them. */
  | { state: 'dispatched'; effect?: DispatchedEffect }
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
 * One step record as the loop writes it: the port names it (`a<attempt>-m<turn>`,
 * `a<attempt>-t<turn>-<index>`) and the store gives it its `seq`.
 */
export type StepWrite = Omit<RunStep, 'id' | 'run_id' | 'attempt' | 'seq'> & {
  /** Write only a step not yet recorded (a call's `started`, sent before the ledger answers). */
  onlyIfAbsent?: boolean;
  /** The outcome the step's event tells where the record has none (a model turn's failure). */
  eventOutcome?: StepOutcome;
};

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
  /**
   * The holder (`principal:<id>`) of a takeover asked of this run, as the last
   * {@link cancelRequested} read it: the loop pauses for them at that safe point.
   */
  takeoverRequested?(): string | undefined;
  /** Records the call `started` (counting one tool call) unless the ledger knows it already; answers what it knows. */
  startInvocation(invocation: Invocation): Promise<InvocationState>;
  /**
   * The watermark: from here on the effect may have happened and is never sent again. A browser
   * effect's lease and sequence go with it, for a next owner to learn its end from the lease.
   */
  markDispatched(invocation: Invocation, effect?: DispatchedEffect): Promise<void>;
  /**
   * Resolves when a dispatched call's answer may be written; throws when this worker may no longer
   * write for the run (its job lock lapsed while Redis did not answer). Absent: always.
   */
  mayAnswer?(): Promise<void>;
  completeInvocation(invocation: Invocation, outcome: ToolOutcome): Promise<void>;
  /**
   * ADR-0177: marks the run's outcome unverified for good (the run view shows it, whatever its end),
   * with the call's last acquisition error: its stable code and its message, which carries no secret.
   */
  markUnverified?(invocation: Invocation, error: { code: string; message: string }): Promise<void>;
  /**
   * Writes a step record and its `step.started` / `step.ended` event. Refused as not the
   * owner, the run was lost (as the transcript's refusal); an ended step is final (a rewrite is
   * dropped). A `waiting_approval` mark the park's approval no longer fences (decided, or the run
   * cancelled meanwhile) is dropped too: the execution that answers the call writes the step on.
   */
  recordStep?(step: StepWrite): Promise<void>;
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
  /**
   * A takeover was asked (between turns or steps, never inside an act): hands the page to
   * `holder` and parks the run on a held `person` approval. Answers its id, or undefined when the
   * page could not be handed over (no live page): the request is dropped and the run goes on.
   */
  pauseForPerson?(holder: string): Promise<string | undefined>;
  /**
   * What a person did with the page while the run waited on approval `approvalId`: who, from
   * when to when, how many inputs, the URLs. Never what they typed. Undefined when no person
   * took the page over (the approval was decided without a takeover).
   */
  personAccount?(approvalId: string): Promise<PersonAccount | undefined>;
  /**
   * Takeovers of this run (a running run paused for a person) handed back since the model last
   * heard of one: each is told to the model before its next turn, once.
   */
  takeoversToTell?(told: ReadonlySet<string>): Promise<Array<{ approvalId: string; account: PersonAccount }>>;
}

/** A person's takeover as the run tells it: counts, times and URLs, never what they typed. */
export interface PersonAccount {
  holder: string;
  sinceMs: number;
  endedAtMs: number;
  inputs: number | null;
  startUrl: string | null;
  endUrl: string | null;
}

/** What a tool call runs with: its ledger id, its deadline, the worker's signal, the watermark hook. */
export interface ToolCallContext {
  invocationId: string;
  deadlineMs: number;
  signal: AbortSignal;
  /** Effects call it right before anything leaves: from then on the call is never sent again. */
  beforeDispatch: (effect?: DispatchedEffect) => Promise<void>;
}

/** One call as its executor ran it: what the model and the ledger get, and what the platform keeps. */
export interface ToolRun {
  outcome: ToolOutcome;
  /**
   * The evidence key of the page a successful call saw (ADR-0130 d7): for the breaker only, never
   * part of the result the model reads or the ledger stores. Null for a call without one.
   */
  evidenceKey: string | null;
  /** What the call captured beside its result (the settled page's screenshot); never shown to the model. */
  artifacts: PageArtifacts;
}

export interface ToolExecutor {
  definitions(): readonly ToolDefinition[];
  /**
   * Runs one call and answers, with its outcome, the evidence key and artifacts it produced: what
   * the loop dispatches through. An executor without it is run through {@link execute} and its
   * `take…()` hand-overs, read at once after it (`performCall` in `tool-run.ts`).
   */
  perform?(call: ToolCall, context: ToolCallContext): Promise<ToolRun>;
  /**
   * The evidence key of the last {@link execute}'s successful result, handed over once (ADR-0130
   * d7): the platform's own, never part of the result the model reads or the ledger stores.
   */
  takeEvidenceKey?(): string | null;
  /**
   * What the last {@link execute} captured beside its result: the settled page's screenshot after
   * navigate and act, by artifact name. Handed over once, like the evidence key; never shown to
   * the model.
   */
  takeArtifacts?(): PageArtifacts;
  /** Runs one call. Effects call `beforeDispatch` right before anything leaves. */
  execute(call: ToolCall, context: ToolCallContext): Promise<ToolOutcome>;
  /**
   * Answers a call that a run's earlier owner dispatched as `effect` and never had answered, from
   * what the lease recorded of it; never sends it again. Undefined where this executor cannot tell.
   */
  handedOver?(
    call: ToolCall,
    effect: DispatchedEffect,
    context: { invocationId: string; deadlineMs: number; signal: AbortSignal },
  ): Promise<ToolOutcome | undefined>;
}

export type ExecutionEnd =
  /** `output`: the answer's JSON value, validated against the run's output schema, where it has one. */
  | { kind: 'succeeded'; answer: string; output?: unknown }
  | {
      kind: 'failed';
      /** A failure reason, or the code of the tool whose failure ended the run. */
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
  /** `detail`: why, where the run's own side ended it (its MCP client went idle). */
  | { kind: 'cancelled'; detail?: string };

export interface RunLoopOptions {
  run: RunPort;
  model: Model;
  tools: ToolExecutor;
  policy: ToolPolicy;
  limits: RunLimits;
  /** The run's deadline (epoch ms). */
  deadlineMs: number;
  /** Aborted when the worker shuts down or the run is cancelled: calls in flight are cut short. */
  signal: AbortSignal;
  /**
   * Aborted when the worker begins to stop: the execution hands the run back before its next call
   * (model or tool), and the calls in flight run on until {@link signal} aborts.
   */
  stopSignal?: AbortSignal;
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
   * Seals a call's secret arguments into its transcript entry, so a call
   * parked on its approval can still be dispatched with its real text by a later execution.
   * Without it they are held in this execution's memory only.
   */
  argumentSealer?: ArgumentSealer;
  /**
   * The caller's `output_schema` and its compiled validator: the final answer is JSON that takes
   * it, or goes back to the model once with the validator's errors (see `output-check.ts`).
   */
  output?: { schema: Readonly<Record<string, unknown>>; validate: OutputValidator };
}

/** What one execution keeps beside its transcript: the tool plan, and whether the breaker was restored. */
export interface LoopContext {
  plan: RosterPlan;
  breakerLoaded: boolean;
  /** The secret arguments of calls this execution's model asked for, by call id. */
  secrets: Map<string, Record<string, string>>;
}
