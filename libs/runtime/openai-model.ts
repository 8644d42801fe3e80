import { setTimeout as sleepFor } from 'node:timers/promises';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type {
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import { WORST_CASE_OUTPUT_TOKENS } from './cost.js';
import {
  type Model,
  ModelBudgetExceeded,
  type ModelCallLimits,
  ModelError,
  type ModelRequest,
  type ModelResponse,
  type ModelUsage,
  type ToolCall,
  type ToolDefinition,
  type TranscriptEntry,
} from './model.js';

const ZERO_USAGE: ModelUsage = Object.freeze({ inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 });

/**
 * The `openai-compatible` model (DESIGN §7): chat completions with tool calling against any base
 * URL (vLLM, Ollama, OpenRouter, OpenAI), on the official `openai` client with its own retries off.
 * Retries are ours: each attempt is reported to `onAttempt`, the loop counts the call once however
 * many attempts it took, and only attempts that the server answered with usage are charged.
 */
export interface OpenAiCompatibleModelOptions {
  /** The model's name in ops/models.yaml (the key its price is under); `Model.name`. */
  name: string;
  /** The model's name in the API (`model` in the request body). */
  model: string;
  /** Up to and including the version segment, e.g. `https://api.openai.com/v1`. */
  baseUrl: string;
  /** Sent as `Authorization: Bearer …`; never part of an error message. */
  apiKey: string;
  /**
   * `max_completion_tokens`, sent on every request: at most 8,192, the output a worst-case call is
   * priced at (ADR-0130 d1); unset sends 8,192. Without a cap a server may answer up to its context
   * window, and the worst case GET /v1/models shows would bound nothing.
   */
  maxOutputTokens?: number;
  /** Sampling temperature, 0 to 2; unset leaves the server's default. */
  temperature?: number;
  /**
   * Attempts per model call, the first included. Default 3. One attempt fails the run on any blip;
   * many attempts let a dead server hold the run for `attempts × timeoutMs`.
   */
  attempts?: number;
  /**
   * Backoff before attempt n+1: a uniformly random share (full jitter) of min(maxMs, baseMs × 2ⁿ⁻¹),
   * raised to a server's `retry-after` up to maxMs. Default 500 ms, 8 s.
   */
  backoff?: { baseMs: number; maxMs: number };
  /** Longest one attempt may take (ms), further cut to the run's deadline. Default 120 s. */
  timeoutMs?: number;
  /** Accept a response without usage as zero tokens: only for a model priced at zero (a local one). */
  usageOptional?: boolean;
  /** Told after every attempt, for metrics and logs. */
  onAttempt?: (attempt: ModelAttempt) => void;
  /** For tests: the backoff wait (it must reject when `signal` aborts), the jitter and the clock. */
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
  random?: () => number;
  clock?: () => number;
}

export interface ModelAttempt {
  /** 1 for the first attempt. */
  attempt: number;
  ok: boolean;
  /** The HTTP status of a failed attempt the server answered. */
  status?: number;
  code?: AttemptFailureCode;
}

export type AttemptFailureCode = 'http_status' | 'connection' | 'timeout' | 'invalid_output' | 'unexpected';

/** Why a model call failed; every code fails the run `model_error` (`deadline_exceeded` may map to the run's). */
export type ModelCallErrorCode =
  | 'model_rejected'
  | 'model_unavailable'
  | 'invalid_output'
  | 'invalid_request'
  | 'deadline_exceeded';

export class ModelCallError extends ModelError {
  constructor(
    message: string,
    readonly code: ModelCallErrorCode,
    readonly status?: number,
    usage: ModelUsage = ZERO_USAGE,
  ) {
    super(message, usage);
  }
}

interface CompiledOptions {
  outputCapTokens: number;
  attempts: number;
  backoff: { baseMs: number; maxMs: number };
  timeoutMs: number;
}

/** Checks the options once, at start-up; a message names the option, never its value. */
export function compileOpenAiModelOptions(options: OpenAiCompatibleModelOptions): CompiledOptions {
  const fail = (what: string): never => {
    throw new Error(`openai-compatible model ${options.name}: ${what}`);
  };
  if (!URL.canParse(options.baseUrl) || !/^https?:$/.test(new URL(options.baseUrl).protocol))
    fail('baseUrl: expected an http(s) URL');
  if (options.apiKey.length === 0) fail('apiKey: expected a key');
  if (options.model.length === 0) fail('model: expected the API model name');
  const positiveInteger = (value: number | undefined) =>
    value === undefined || (Number.isInteger(value) && value > 0);
  if (!positiveInteger(options.maxOutputTokens)) fail('maxOutputTokens: expected a positive integer');
  const outputCapTokens = options.maxOutputTokens ?? WORST_CASE_OUTPUT_TOKENS;
  if (outputCapTokens > WORST_CASE_OUTPUT_TOKENS)
    fail(`maxOutputTokens: expected at most ${WORST_CASE_OUTPUT_TOKENS} (ADR-0130 d1's worst case)`);
  if (options.temperature !== undefined && !(options.temperature >= 0 && options.temperature <= 2))
    fail('temperature: expected 0 to 2');
  const attempts = options.attempts ?? 3;
  if (!(Number.isInteger(attempts) && attempts >= 1 && attempts <= 10)) fail('attempts: expected 1 to 10');
  const backoff = options.backoff ?? { baseMs: 500, maxMs: 8_000 };
  if (!(backoff.baseMs > 0 && backoff.maxMs >= backoff.baseMs)) fail('backoff: expected 0 < baseMs ≤ maxMs');
  const timeoutMs = options.timeoutMs ?? 120_000;
  if (!(timeoutMs > 0)) fail('timeoutMs: expected a positive number');
  return { outputCapTokens, attempts, backoff, timeoutMs };
}

/**
 * OpenAI function names match `^[a-zA-Z0-9_-]{1,64}$`; ours have dots (`browser.navigate`). A dot
 * becomes `__`, so a name that already holds `__` could not be told apart and is refused.
 */
export function encodeToolName(name: string): string {
  const encoded = name.replaceAll('.', '__');
  if (name.includes('__') || !/^[a-zA-Z0-9_-]{1,64}$/.test(encoded))
    throw new ModelCallError(
      `tool name "${name}" cannot be offered as an OpenAI function name`,
      'invalid_request',
    );
  return encoded;
}

export function decodeToolName(encoded: string): string {
  return encoded.replaceAll('__', '.');
}

const METADATA_KEY = /^[A-Za-z0-9_.-]+$/;

/**
 * The runtime metadata row (ADR-0130 d9): one system message of `key=value` lines, sorted by key,
 * placed last — after the whole conversation. It is rendered per request and never stored in the
 * transcript, so every earlier message is the same bytes from one call to the next and the cached
 * prefix covers the whole history; a row placed before the newest turn would cost that turn's cache.
 */
function metadataRow(metadata: Readonly<Record<string, string>> | undefined): ChatCompletionMessageParam[] {
  const entries = Object.entries(metadata ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  if (entries.length === 0) return [];
  for (const [key, value] of entries)
    if (!METADATA_KEY.test(key) || /[\r\n]/.test(value))
      throw new ModelCallError(
        `runtime metadata "${key}": expected a plain key and a one-line value`,
        'invalid_request',
      );
  return [{ role: 'system', content: entries.map(([key, value]) => `${key}=${value}`).join('\n') }];
}

function message(entry: TranscriptEntry): ChatCompletionMessageParam {
  switch (entry.kind) {
    case 'input':
      return { role: 'user', content: entry.text };
    case 'model':
      return entry.toolCalls.length === 0
        ? { role: 'assistant', content: entry.answer ?? '' }
        : {
            role: 'assistant',
            content: null,
            tool_calls: entry.toolCalls.map((call) => ({
              id: call.id,
              type: 'function' as const,
              function: { name: encodeToolName(call.name), arguments: JSON.stringify(call.args) },
            })),
          };
    case 'tool':
      return { role: 'tool', tool_call_id: entry.callId, content: JSON.stringify(entry.outcome) };
    default:
      return assertNever(entry);
  }
}

function assertNever(value: never): never {
  // Only the kind: an entry may hold page content, which no error message carries.
  throw new ModelCallError(
    `unknown transcript entry kind ${String((value as { kind?: unknown }).kind)}`,
    'invalid_request',
  );
}

export function chatMessages(request: ModelRequest): ChatCompletionMessageParam[] {
  return [
    ...(request.instructions ? [{ role: 'system' as const, content: request.instructions }] : []),
    ...request.transcript.map(message),
    ...metadataRow(request.runtimeMetadata),
  ];
}

function chatTool(tool: ToolDefinition): ChatCompletionTool {
  return {
    type: 'function',
    function: { name: encodeToolName(tool.name), description: tool.description, parameters: tool.parameters },
  };
}

/** The part of a chat completion the adapter reads; servers vary, so it is parsed, not trusted. */
const completionSchema = z.object({
  choices: z
    .array(
      z.object({
        message: z.object({
          content: z.string().nullish(),
          tool_calls: z
            .array(
              z.object({
                id: z.string().nullish(),
                type: z.literal('function').optional(),
                function: z.object({ name: z.string().min(1), arguments: z.string().nullish() }),
              }),
            )
            .nullish(),
        }),
      }),
    )
    .min(1),
  usage: z
    .object({
      prompt_tokens: z.number().int().nonnegative(),
      completion_tokens: z.number().int().nonnegative(),
      prompt_tokens_details: z.object({ cached_tokens: z.number().int().nonnegative().nullish() }).nullish(),
    })
    .nullish(),
});

/** A failed attempt: whether another may follow, what to report, and any tokens it was billed. */
class AttemptFailure extends Error {
  constructor(
    readonly code: AttemptFailureCode,
    readonly detail: string,
    readonly retryable: boolean,
    readonly extra: { status?: number; retryAfterMs?: number; usage?: ModelUsage } = {},
  ) {
    super(detail);
  }
}

function addUsage(a: ModelUsage, b: ModelUsage | undefined): ModelUsage {
  if (!b) return a;
  return {
    inputTokens: a.inputTokens + b.inputTokens,
    cachedInputTokens: a.cachedInputTokens + b.cachedInputTokens,
    outputTokens: a.outputTokens + b.outputTokens,
  };
}

export class OpenAiCompatibleModel implements Model {
  readonly name: string;
  readonly #options: OpenAiCompatibleModelOptions;
  readonly #compiled: CompiledOptions;
  readonly #client: OpenAI;

  constructor(options: OpenAiCompatibleModelOptions) {
    this.#compiled = compileOpenAiModelOptions(options);
    this.#options = options;
    this.name = options.name;
    // Everything explicit: the client would otherwise read OPENAI_* variables (an organization
    // header sent to a third-party base URL, a console log level) behind the frozen config's back.
    this.#client = new OpenAI({
      baseURL: options.baseUrl,
      apiKey: options.apiKey,
      organization: null,
      project: null,
      webhookSecret: null,
      logLevel: 'off',
      maxRetries: 0,
      timeout: this.#compiled.timeoutMs,
    });
  }

  /**
   * One model call, however many attempts it takes. It is charged (by the loop, once) with the
   * successful response's usage plus any usage the server reported on attempts whose output could
   * not be used; an attempt that failed without an answer (a status, a dropped connection, a
   * timeout) reported no usage and charges nothing. Never sleeps past `deadlineMs`; an aborted
   * `signal` rejects with its reason (not a ModelError), so the run is handed back, not failed.
   */
  async call(request: ModelRequest, limits: ModelCallLimits): Promise<ModelResponse> {
    const { attempts, backoff } = this.#compiled;
    const clock = this.#options.clock ?? Date.now;
    const body = this.#body(request);
    let billed = ZERO_USAGE;
    for (let attempt = 1; ; attempt += 1) {
      limits.signal?.throwIfAborted();
      const remainingMs = limits.deadlineMs - clock();
      if (remainingMs <= 0)
        throw new ModelCallError(
          'the run deadline passed before the model call',
          'deadline_exceeded',
          undefined,
          billed,
        );
      // ADR-0130 d1: every attempt, the retries included, is checked against the cost limit before
      // it starts, with what this call's earlier attempts were billed: the run overshoots by one attempt at most.
      const refusal = limits.admitAttempt?.(billed);
      if (refusal !== undefined) throw new ModelBudgetExceeded(refusal, billed);
      const timeoutMs = Math.min(this.#compiled.timeoutMs, remainingMs);
      let failure: AttemptFailure;
      try {
        const response = await this.#attempt(body, timeoutMs, limits.signal);
        this.#options.onAttempt?.({ attempt, ok: true });
        return { ...response, usage: addUsage(billed, response.usage) };
      } catch (error) {
        if (limits.signal?.aborted) throw limits.signal.reason;
        if (!(error instanceof AttemptFailure)) throw error;
        failure = error;
      }
      billed = addUsage(billed, failure.extra.usage);
      const { status } = failure.extra;
      this.#options.onAttempt?.({
        attempt,
        ok: false,
        ...(status !== undefined ? { status } : {}),
        code: failure.code,
      });
      limits.signal?.throwIfAborted();
      const fail = (message: string, code: ModelCallErrorCode) =>
        new ModelCallError(message, code, status, billed);
      if (!failure.retryable)
        throw fail(
          `the model call failed: ${failure.detail}`,
          failure.code === 'http_status'
            ? 'model_rejected'
            : failure.code === 'invalid_output'
              ? 'invalid_output'
              : 'model_unavailable',
        );
      if (failure.code === 'timeout' && timeoutMs < this.#compiled.timeoutMs)
        throw fail('the model call ran into the run deadline', 'deadline_exceeded');
      if (attempt >= attempts)
        throw fail(
          `the model failed ${attempts} attempt(s), last: ${failure.detail}`,
          failure.code === 'invalid_output' ? 'invalid_output' : 'model_unavailable',
        );
      const ceilingMs = Math.min(backoff.maxMs, backoff.baseMs * 2 ** (attempt - 1));
      const jitteredMs = Math.round((this.#options.random ?? Math.random)() * ceilingMs);
      const waitMs = Math.min(backoff.maxMs, Math.max(jitteredMs, failure.extra.retryAfterMs ?? 0));
      if (clock() + waitMs >= limits.deadlineMs)
        throw fail(
          `the model failed (${failure.detail}) and the run deadline leaves no time to retry`,
          'deadline_exceeded',
        );
      await (this.#options.sleep ?? defaultSleep)(waitMs, limits.signal).catch((error: unknown) => {
        throw limits.signal?.aborted ? limits.signal.reason : error;
      });
    }
  }

  #body(request: ModelRequest): ChatCompletionCreateParamsNonStreaming {
    const { model, temperature } = this.#options;
    return {
      model,
      messages: chatMessages(request),
      ...(request.tools.length > 0 ? { tools: request.tools.map(chatTool) } : {}),
      max_completion_tokens: this.#compiled.outputCapTokens,
      ...(temperature !== undefined ? { temperature } : {}),
    };
  }

  /** One HTTP attempt; every failure comes out as an AttemptFailure, none carries the key. */
  async #attempt(
    body: ChatCompletionCreateParamsNonStreaming,
    timeoutMs: number,
    signal: AbortSignal | undefined,
  ): Promise<ModelResponse> {
    // Each attempt gets a signal of its own, tied to the run's only while it lasts: the client
    // leaves its abort listener on the signal it is given, which would pile up on the run's.
    const attempt = new AbortController();
    const abort = () => attempt.abort(signal?.reason);
    if (signal?.aborted) abort();
    else signal?.addEventListener('abort', abort, { once: true });
    let raw: unknown;
    try {
      raw = await this.#client.chat.completions.create(body, { timeout: timeoutMs, signal: attempt.signal });
    } catch (error) {
      throw this.#failure(error);
    } finally {
      signal?.removeEventListener('abort', abort);
    }
    return this.#response(raw);
  }

  #failure(error: unknown): AttemptFailure {
    if (error instanceof APIConnectionTimeoutError)
      return new AttemptFailure('timeout', 'the attempt timed out', true);
    if (error instanceof APIUserAbortError)
      return new AttemptFailure('unexpected', 'the attempt was aborted', false);
    if (error instanceof APIConnectionError)
      return new AttemptFailure('connection', 'the connection failed', true);
    if (error instanceof APIError && error.status !== undefined) {
      const status = error.status;
      // The server's own message may repeat the key (some echo it on 401): only its code is kept.
      const code = typeof error.code === 'string' ? this.#redacted(error.code).slice(0, 64) : undefined;
      const retryable = status === 408 || status === 409 || status === 429 || status >= 500;
      return new AttemptFailure('http_status', `HTTP ${status}${code ? ` (${code})` : ''}`, retryable, {
        status,
        retryAfterMs: retryAfterMs(error.headers),
      });
    }
    return new AttemptFailure(
      'unexpected',
      `unexpected ${error instanceof Error ? error.name : 'failure'}`,
      false,
    );
  }

  #redacted(text: string): string {
    return text.replaceAll(this.#options.apiKey, '[redacted]');
  }

  /** Reads a completion; output that cannot be used is a retryable attempt failure carrying its usage. */
  #response(raw: unknown): ModelResponse {
    const parsed = completionSchema.safeParse(raw);
    if (!parsed.success)
      throw new AttemptFailure('invalid_output', 'the response is not a chat completion', true);
    const { choices, usage } = parsed.data;
    const message = choices[0]?.message;
    if (!usage && !this.#options.usageOptional)
      throw new AttemptFailure(
        'invalid_output',
        'the response reports no usage (a priced model must)',
        false,
      );
    const modelUsage: ModelUsage = usage
      ? {
          inputTokens: usage.prompt_tokens,
          cachedInputTokens: usage.prompt_tokens_details?.cached_tokens ?? 0,
          outputTokens: usage.completion_tokens,
        }
      : ZERO_USAGE;
    // Input counts the cached part too (cost prices input − cached at the uncached rate).
    if (modelUsage.cachedInputTokens > modelUsage.inputTokens)
      throw new AttemptFailure('invalid_output', 'the response reports more cached than input tokens', false);
    const invalid = (detail: string) =>
      new AttemptFailure('invalid_output', detail, true, { usage: modelUsage });
    const toolCalls = (message?.tool_calls ?? []).map((call, index): ToolCall => {
      let args: unknown;
      try {
        args = JSON.parse(call.function.arguments || '{}');
      } catch {
        throw invalid(`tool call ${index + 1} has arguments that are not JSON`);
      }
      if (typeof args !== 'object' || args === null || Array.isArray(args))
        throw invalid(`tool call ${index + 1} has arguments that are not an object`);
      return {
        id: call.id || `call_${index + 1}`,
        name: decodeToolName(call.function.name),
        args: args as Record<string, unknown>,
      };
    });
    if (new Set(toolCalls.map((call) => call.id)).size !== toolCalls.length)
      throw invalid('two tool calls share an id');
    // Text beside tool calls is the model thinking aloud, not an answer: an answer ends the run.
    if (toolCalls.length > 0) return { toolCalls, usage: modelUsage };
    if (!message?.content) throw invalid('the response has neither tool calls nor an answer');
    return { toolCalls: [], answer: message.content, usage: modelUsage };
  }
}

async function defaultSleep(ms: number, signal?: AbortSignal): Promise<void> {
  await sleepFor(ms, undefined, signal ? { signal } : undefined);
}

/** A server's `retry-after-ms` or `retry-after` (seconds) header, if it sent one. */
function retryAfterMs(headers: Headers | undefined): number | undefined {
  const ms = Number.parseFloat(headers?.get('retry-after-ms') ?? '');
  if (Number.isFinite(ms) && ms >= 0) return ms;
  const seconds = Number.parseFloat(headers?.get('retry-after') ?? '');
  return Number.isFinite(seconds) && seconds >= 0 ? seconds * 1_000 : undefined;
}
