import { setTimeout as sleepFor } from 'node:timers/promises';
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError, APIUserAbortError } from 'openai';
import type { ChatCompletionCreateParamsNonStreaming } from 'openai/resources/chat/completions';
import type {
  Model,
  ModelCallLimits,
  ModelRequest,
  ModelResponse,
  ModelUsage,
  ToolCall,
} from '../runtime/index.js';
import { ModelBudgetExceeded } from '../runtime/index.js';
import { chatMessages, chatTool, completionSchema, decodeToolName } from './openai-chat-format.js';
import {
  AttemptFailure,
  ModelCallError,
  type ModelCallErrorCode,
  ZERO_USAGE,
} from './openai-model-errors.js';
import {
  type CompiledOptions,
  compileOpenAiModelOptions,
  type OpenAiCompatibleModelOptions,
} from './openai-model-options.js';

export { chatMessages, decodeToolName, encodeToolName } from './openai-chat-format.js';
export { type AttemptFailureCode, ModelCallError, type ModelCallErrorCode } from './openai-model-errors.js';
export {
  compileOpenAiModelOptions,
  type ModelAttempt,
  type OpenAiCompatibleModelOptions,
} from './openai-model-options.js';

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
      // The final answer takes the caller's schema where the server supports structured output;
      // not strict, as strict mode accepts only a subset of 2020-12: our own validator decides.
      ...(request.outputSchema
        ? {
            response_format: {
              type: 'json_schema' as const,
              json_schema: { name: 'output', schema: { ...request.outputSchema }, strict: false },
            },
          }
        : {}),
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
