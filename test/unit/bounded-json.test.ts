import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { boundedJson, jsonBoundsProblem } from '../../libs/contracts/index.js';

/** `depth` nested arrays around 1, built without recursion. */
const nested = (depth: number): unknown => JSON.parse(`${'['.repeat(depth)}1${']'.repeat(depth)}`);

describe('bounded JSON', () => {
  const bounds = { maxDepth: 32, maxBytes: 1_024 };

  it('counts the field itself as the first level: 32 nested containers pass, 33 do not', () => {
    expect(jsonBoundsProblem(nested(32), bounds)).toBeUndefined();
    expect(jsonBoundsProblem(nested(33), bounds)).toBe('nested deeper than 32 levels');
    expect(jsonBoundsProblem({ a: { b: nested(30) } }, bounds)).toBeUndefined();
    expect(jsonBoundsProblem({ a: { b: nested(31) } }, bounds)).toBe('nested deeper than 32 levels');
  });

  it('takes scalars and empty containers as they are', () => {
    for (const value of [null, 0, 'text', true, [], {}])
      expect(jsonBoundsProblem(value, bounds)).toBeUndefined();
  });

  it('walks 100,000 levels without touching the call stack', () => {
    expect(jsonBoundsProblem(nested(100_000), bounds)).toBe('nested deeper than 32 levels');
  });

  it('measures size in UTF-8 bytes of the compact JSON text', () => {
    expect(jsonBoundsProblem('é'.repeat(509), bounds)).toBeUndefined(); // 1,018 + 2 quotes
    expect(jsonBoundsProblem('é'.repeat(512), bounds)).toMatch(
      /^1026 bytes of JSON, over the 1024 bytes allowed$/,
    );
  });

  it('checks the bounds before the inner schema sees the value', () => {
    const schema = boundedJson(bounds, z.record(z.string(), z.json()));
    const refused = schema.safeParse({ deep: nested(5_000) });
    expect(refused.success).toBe(false);
    expect(refused.error?.issues).toEqual([
      expect.objectContaining({ message: 'nested deeper than 32 levels' }),
    ]);
    expect(schema.safeParse({ ok: [1, { two: 2 }] }).data).toEqual({ ok: [1, { two: 2 }] });
    expect(schema.safeParse([1]).success).toBe(false);
  });
});
