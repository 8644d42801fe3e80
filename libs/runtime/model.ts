import type { EarlierEffect } from '../contracts/index.js';
import { LeaseholdError } from '../contracts/index.js';

/**
 * The model side of the run loop (DESIGN §7): a transcript goes in, tool calls or an answer come
 * out, with the tokens used. Two implementations: `scripted` (here) and `openai-compatible`.
 */

/** One tool call a model asks for; `id` is the model's own, unique within its response. */
export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
  /** A script's step that said `"may_fail": true`: its failure does not stop the script. */
  mayFail?: true;
}

/** What the loop tells the model a tool call gave: a result, or a stable error code. */
export type ToolOutcome =
  /** `note`: what the call's step says beside its success ("completed during hand-over"). */
  | { ok: true; result: unknown; note?: string }
  | {
      ok: false;
      code: string;
      message: string;
      /** ADR-0177: the bounded acquisition retry was exhausted; whether anything happened is unverified. */
      unverified?: true;
      /** The page the failed call left, when it left one (`navigation_failed`: Chromium's error page). */
      result?: { observation: unknown };
    };

export type TranscriptEntry =
  | {
      kind: 'input';
      text: string;
      /**
       * A retried run's note (retry starts clean): the effects its earlier attempts
       * dispatched, so a model does not repeat them blindly. `text` tells them in words.
       */
      earlierEffects?: EarlierEffect[];
      /**
       * The run's final answer did not take its output schema: the validator's errors, told back
       * once (`text` tells them in words); the turn that follows may only answer.
       */
      outputErrors?: string[];
      /**
       * A note that a person held the page (a takeover of the running run): the `person`
       * approval it tells, so it is told once, and the page as it is now. `text` tells it in words.
       */
      personApprovalId?: string;
      observation?: unknown;
    }
  | {
      kind: 'model';
      toolCalls: ToolCall[];
      answer?: string;
      /** A turn that could not name its call (a script's element not on the page): see {@link ModelResponse}. */
      failedStep?: FailedStep;
      /**
       * The secret arguments of this turn's calls, sealed, by call id — so a
       * call parked on its approval can be dispatched with its real text by a later execution.
       */
      sealedArgs?: Record<string, string>;
    }
  | { kind: 'tool'; callId: string; name: string; outcome: ToolOutcome };

/** A model turn that failed before any call left: its code, and whether its step may fail. */
export interface FailedStep {
  code: 'element_not_found';
  message: string;
  mayFail: boolean;
}

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
  /**
   * Top-level arguments that are secrets. The run records them as `[secret]`
   * (transcript, approvals, events, logs); only the dispatched call carries the value.
   */
  secretArguments?: readonly string[];
}

export interface ModelUsage {
  inputTokens: number;
  cachedInputTokens: number;
  outputTokens: number;
}

export interface ModelRequest {
  transcript: readonly TranscriptEntry[];
  /** Tools the model may call now; empty when it may only answer (a reserve was reached). */
  tools: readonly ToolDefinition[];
  /** The agent's instructions, sent first (the start of the cached prefix). */
  instructions?: string;
  /**
   * Platform-trusted facts for this request only (ADR-0130 d9: `browser_origins`), rendered as
   * `key=value` lines outside the cached prefix. Keys are `[A-Za-z0-9_.-]`, values one line.
   */
  runtimeMetadata?: Readonly<Record<string, string>>;
  /** The JSON Schema the final answer must take (a caller's `output_schema`), where the run has one. */
  outputSchema?: Readonly<Record<string, unknown>>;
}

export interface ModelResponse {
  toolCalls: ToolCall[];
  /** The final answer; a response with an answer ends the run. */
  answer?: string;
  usage: ModelUsage;
  /**
   * The turn could not name its call: a scripted step's element is not on the page. The run fails
   * with its code at this turn, unless the step may fail; then the turn counts and the script goes on.
   */
  failedStep?: FailedStep;
}

/** What bounds one model call: the run's deadline, its signal, and its cost limit per attempt. */
export interface ModelCallLimits {
  deadlineMs: number;
  signal?: AbortSignal;
  /**
   * ADR-0130 d1: "every model attempt is checked against the limit before it starts". Asked before
   * each attempt with the usage this call's earlier attempts were billed; an answer (the refusal's
   * detail) ends the call with `ModelBudgetExceeded` before that attempt is sent.
   */
  admitAttempt?: (billed: ModelUsage) => string | undefined;
}

export interface Model {
  readonly name: string;
  /**
   * A script, not a model with judgement: any failed step ends the run with that
   * step's code unless the step said `"may_fail": true`. A model hears a tool failure as the
   * call's result and recovers, except where `RUN_ERROR_TABLE` says the code fails the run.
   */
  readonly scripted?: boolean;
  call(request: ModelRequest, limits: ModelCallLimits): Promise<ModelResponse>;
}

/** A model that cannot go on (its policy broke, or its service keeps failing): the run fails `model_error`. */
export class ModelError extends LeaseholdError {
  override readonly name: string = 'ModelError';

  constructor(
    message: string,
    /** Tokens the server billed for the call even so (attempts whose output could not be used). */
    readonly usage?: ModelUsage,
    code = 'model_error',
  ) {
    super(code, message);
  }
}

/** A call stopped before an attempt because the run's cost limit is reached: the run fails `budget_exceeded`. */
export class ModelBudgetExceeded extends ModelError {}

/**
 * The model's side ended the run as a cancel does (an MCP client gone past its idle
 * time): the run ends `cancelled` with this message, through its own end, its lease released there.
 */
export class ModelCancelled extends ModelError {
  override readonly name: string = 'ModelCancelled';

  constructor(message: string) {
    super(message, undefined, 'cancelled');
  }
}
