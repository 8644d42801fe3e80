import { describe, expect, it } from 'vitest';
import { ApiError, runViewSchema } from '../../libs/contracts/index.js';
import { parseRun } from '../../libs/store/run-records.js';

/** A run record's hash fields as the store's scripts return them (a succeeded, budgeted run). */
function storedFields(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    id: 'run_0123456789abcdefghjk',
    tenant: 'acme',
    principal: 'alice',
    session_id: 'ses_0123456789abcdefghjk',
    agent_id: 'agt_0123456789abcdefghjk',
    agent_version: 'a'.repeat(64),
    profile_id: '',
    parent_run_id: '',
    status: 'succeeded',
    attempt: '2',
    execution: '3',
    input: JSON.stringify({
      text: 'hello',
      script: { steps: [{ tool: 'noop', args: [1, [2, { x: null }]] }] },
    }),
    limits: JSON.stringify({
      max_steps: 32,
      max_model_calls: 24,
      max_tool_calls: 64,
      reserve_model_calls: 2,
      reserve_tool_calls: 4,
      max_cost_micro_usd: 1_500_000,
      cost_reserve_micro_usd: 0,
    }),
    steps: '3',
    model_calls: '2',
    tool_calls: '1',
    cost_micro_usd: '1200',
    cancel_requested: '0',
    deadline_at: '1796418258054',
    created_at: '1796414658054',
    updated_at: '1796414659054',
    ended_at: '1796414659054',
    result: JSON.stringify({ answer: 'hi', items: [1, 2.5, 'three', true, null] }),
    error_reason: '',
    owner: '',
    ...overrides,
  };
}

/** `depth` arrays inside one another around `leaf`. */
function nested(depth: number, leaf = 0): string {
  return `${'['.repeat(depth)}${leaf}${']'.repeat(depth)}`;
}

describe('a stored run record, read (parsed once, without walking its JSON twice)', () => {
  it('reads as the view schema reads it, field for field', () => {
    const { run } = parseRun(storedFields()) ?? {};
    expect(run).toBeDefined();
    expect(run).toEqual(runViewSchema.parse(run));
    expect(run?.input).toEqual({
      text: 'hello',
      script: { steps: [{ tool: 'noop', args: [1, [2, { x: null }]] }] },
    });
    expect(run?.result).toEqual({ answer: 'hi', items: [1, 2.5, 'three', true, null] });
    expect(run?.limits.max_cost_usd).toBe('1.5');
  });

  it('refuses a malformed field as record_unreadable, naming the run', () => {
    const malformed: Array<Record<string, string>> = [
      { status: 'napping' },
      { attempt: 'two' },
      { agent_version: 'v1' },
    ];
    for (const overrides of malformed) {
      expect(() => parseRun(storedFields(overrides))).toThrow(ApiError);
      try {
        parseRun(storedFields(overrides));
      } catch (error) {
        expect((error as ApiError).code).toBe('record_unreadable');
        expect((error as ApiError).message).toContain('run_0123456789abcdefghjk');
      }
    }
  });

  it('refuses an input or a result nested past what a reader takes, and reads one well inside it', () => {
    for (const field of ['input', 'result']) {
      expect(() => parseRun(storedFields({ [field]: nested(5_000) }))).toThrow(/cannot be read/);
      expect(() => parseRun(storedFields({ [field]: nested(1_001) }))).toThrow(/cannot be read/);
      expect(parseRun(storedFields({ [field]: nested(1_000) }))?.run).toBeDefined();
    }
  });
});
