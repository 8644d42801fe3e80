import { describe, expect, it } from 'vitest';
import { canonicalJson, contentAddress, recordIdSchema, sha256Hex } from '../../libs/contracts/index.js';
import { agentVersionOf, idempotentRunId } from '../../libs/store/index.js';

describe('canonical JSON and content addresses', () => {
  it('writes the same text for the same content whatever the order of its keys', () => {
    const a = { b: 1, a: { d: [3, { z: true, y: null }], c: 'x' } };
    const b = { a: { c: 'x', d: [3, { y: null, z: true }] }, b: 1 };
    expect(canonicalJson(a)).toBe('{"a":{"c":"x","d":[3,{"y":null,"z":true}]},"b":1}');
    expect(canonicalJson(b)).toBe(canonicalJson(a));
    expect(contentAddress(b)).toBe(contentAddress(a));
  });

  it('keeps array order, so reordered arrays are different content', () => {
    expect(canonicalJson([1, 2])).not.toBe(canonicalJson([2, 1]));
  });

  it('leaves out undefined members as JSON does and refuses values JSON cannot carry', () => {
    expect(canonicalJson({ a: undefined, b: 2 })).toBe('{"b":2}');
    expect(() => canonicalJson({ a: Number.NaN })).toThrow(TypeError);
    expect(() => canonicalJson({ a: Number.POSITIVE_INFINITY })).toThrow(TypeError);
    expect(() => canonicalJson(undefined)).toThrow(TypeError);
    expect(() => canonicalJson({ a: 1n })).toThrow(TypeError);
  });

  it('escapes strings and keys as JSON does', () => {
    expect(canonicalJson({ 'k"ey': 'line\nnext "quoted"' })).toBe('{"k\\"ey":"line\\nnext \\"quoted\\""}');
  });

  it('hashes with SHA-256 in lower-case hex', () => {
    expect(sha256Hex('abc')).toBe('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it('gives an agent definition the same version whatever its key order or omitted defaults', () => {
    const first = agentVersionOf({
      model: 'scripted',
      instructions: 'do it',
      tools: ['browser.act'],
      limits: {},
      metadata: { b: 1, a: 2 },
    });
    const second = agentVersionOf(
      JSON.parse(
        '{"metadata":{"a":2,"b":1},"tools":["browser.act"],"instructions":"do it","model":"scripted","limits":{}}',
      ),
    );
    expect(second).toBe(first);
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(
      agentVersionOf({ model: 'scripted', instructions: 'do it', tools: [], limits: {}, metadata: {} }),
    ).toBe(agentVersionOf({ model: 'scripted', instructions: 'do it' } as never));
    expect(
      agentVersionOf({ model: 'scripted', instructions: 'do it!', tools: [], limits: {}, metadata: {} }),
    ).not.toBe(
      agentVersionOf({ model: 'scripted', instructions: 'do it', tools: [], limits: {}, metadata: {} }),
    );
  });
});

describe('run ids of idempotent submissions', () => {
  it('derives one valid run id per tenant, session and key', () => {
    const id = idempotentRunId('acme', 'ses_1', 'key-1');
    expect(recordIdSchema.safeParse(id).success).toBe(true);
    expect(id).toMatch(/^run_[0-9a-z]{20}$/);
    expect(idempotentRunId('acme', 'ses_1', 'key-1')).toBe(id);
    expect(idempotentRunId('other', 'ses_1', 'key-1')).not.toBe(id);
    expect(idempotentRunId('acme', 'ses_2', 'key-1')).not.toBe(id);
    expect(idempotentRunId('acme', 'ses_1', 'key-2')).not.toBe(id);
  });
});
