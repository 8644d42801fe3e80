import { z } from 'zod';

/**
 * Bounds on a free-form JSON field: how deeply it may nest and how large its JSON
 * text may be. A value is checked against both before any other schema looks at it, so a
 * recursive parser (zod's own `z.json()`, canonical JSON, the Redis Lua `cjson`) never sees
 * thousands of levels.
 */
export interface JsonBounds {
  /** Containers (objects and arrays) nested inside one another, the field itself counting as one. */
  maxDepth: number;
  /** UTF-8 bytes of the field's compact JSON text. */
  maxBytes: number;
}

/** The nesting limit of every free-form JSON field (agent metadata, scripts, run input). */
export const JSON_MAX_DEPTH = 32;

/**
 * What is wrong with `value` against `bounds`, or undefined when it fits. The depth walk is
 * iterative and stops at the first container past the limit, so a hostile value costs no more
 * than its size and never the call stack.
 */
export function jsonBoundsProblem(value: unknown, bounds: JsonBounds): string | undefined {
  const tooDeep = jsonDepthProblem(value, bounds.maxDepth);
  if (tooDeep) return tooDeep;
  const text = JSON.stringify(value);
  const bytes = text === undefined ? 0 : Buffer.byteLength(text, 'utf8');
  if (bytes > bounds.maxBytes) return `${bytes} bytes of JSON, over the ${bounds.maxBytes} bytes allowed`;
  return undefined;
}

/** The depth half of {@link jsonBoundsProblem}: for a value whose size is bounded already. */
export function jsonDepthProblem(value: unknown, maxDepth: number): string | undefined {
  const pending: Array<[unknown, number]> = [[value, 1]];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [item, depth] = next;
    if (item === null || typeof item !== 'object') continue;
    if (depth > maxDepth) return `nested deeper than ${maxDepth} levels`;
    for (const child of Array.isArray(item) ? item : Object.values(item)) {
      if (child !== null && typeof child === 'object') pending.push([child, depth + 1]);
    }
  }
  return undefined;
}

/**
 * A JSON field within `bounds`, then parsed by `inner` (any JSON value when omitted). The bounds
 * run as a preprocessing step so the API document still shows `inner`'s shape.
 */
export function boundedJson<T extends z.ZodType = z.ZodJSONSchema>(bounds: JsonBounds, inner?: T) {
  return z.preprocess(
    (value, context) => {
      const problem = jsonBoundsProblem(value, bounds);
      if (problem) context.addIssue({ code: 'custom', message: problem, input: value, continue: false });
      return value;
    },
    (inner ?? z.json()) as T,
  );
}
