/**
 * The model side of the run loop (DESIGN §7): a transcript goes in, tool calls or an answer come
 * out, with the tokens used. Two implementations: `scripted` (here) and `openai-compatible`.
 */

/** One tool call a model asks for; `id` is the model's own, unique within its response. */
export interface ToolCall {
  id: string;
  name: string;
  args: Record<string, unknown>;
}

/** What the loop tells the model a tool call gave: a result, or a stable error code. */
export type ToolOutcome =
  | { ok: true; result: unknown }
  | {
      ok: false;
      code: string;
      message: string;
      /** ADR-0177: the bounded acquisition retry was exhausted; whether anything happened is unverified. */
      unverified?: true;
    };

export type TranscriptEntry =
  | { kind: 'input'; text: string }
  | { kind: 'model'; toolCalls: ToolCall[]; answer?: string }
  | { kind: 'tool'; callId: string; name: string; outcome: ToolOutcome };

export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
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
}

export interface ModelResponse {
  toolCalls: ToolCall[];
  /** The final answer; a response with an answer ends the run. */
  answer?: string;
  usage: ModelUsage;
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
  call(request: ModelRequest, limits: ModelCallLimits): Promise<ModelResponse>;
}

/** A model that cannot go on (its policy broke, or its service keeps failing): the run fails `model_error`. */
export class ModelError extends Error {
  override readonly name = 'ModelError';

  constructor(
    message: string,
    /** Tokens the server billed for the call even so (attempts whose output could not be used). */
    readonly usage?: ModelUsage,
  ) {
    super(message);
  }
}

/** A call stopped before an attempt because the run's cost limit is reached: the run fails `budget_exceeded`. */
export class ModelBudgetExceeded extends ModelError {}
