import { WORST_CASE_OUTPUT_TOKENS } from '../runtime/index.js';
import type { AttemptFailureCode } from './openai-model-errors.js';

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

/** The options as compiled: every default applied, every value checked. */
export interface CompiledOptions {
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
