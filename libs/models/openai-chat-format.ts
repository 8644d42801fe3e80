import type { ChatCompletionMessageParam, ChatCompletionTool } from 'openai/resources/chat/completions';
import { z } from 'zod';
import type { ModelRequest, ToolDefinition, TranscriptEntry } from '../runtime/index.js';
import { ModelCallError } from './openai-model-errors.js';

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

export function chatTool(tool: ToolDefinition): ChatCompletionTool {
  return {
    type: 'function',
    function: { name: encodeToolName(tool.name), description: tool.description, parameters: tool.parameters },
  };
}

/** The part of a chat completion the adapter reads; servers vary, so it is parsed, not trusted. */
export const completionSchema = z.object({
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
