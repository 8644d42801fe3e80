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
export type ToolOutcome = { ok: true; result: unknown } | { ok: false; code: string; message: string };

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

export interface Model {
  readonly name: string;
  call(request: ModelRequest, limits: { deadlineMs: number; signal?: AbortSignal }): Promise<ModelResponse>;
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
