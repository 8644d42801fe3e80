import { describe, expect, it } from 'vitest';
import type { LedgerEntry } from '../../libs/contracts/index.js';
import { earlierEffects, retryNote } from '../../libs/store/retry-note.js';

function entry(step: number, tool: string, state: LedgerEntry['state'], result: unknown = null): LedgerEntry {
  return {
    invocation_id: `run_x-a1-s${step}-i0`,
    attempt: 1,
    step,
    index: 0,
    tool,
    state,
    result: result as LedgerEntry['result'],
    started_at_ms: 1,
    updated_at_ms: 2,
  };
}

const transcript = [
  { kind: 'input', text: 'log in' },
  {
    kind: 'model',
    toolCalls: [{ id: 'c1', name: 'browser.navigate', args: { url: 'https://a.test/login' } }],
  },
  {
    kind: 'tool',
    callId: 'c1',
    name: 'browser.navigate',
    outcome: {
      ok: true,
      result: {
        observation: { revision: 'r1', elements: [{ ref: 'e7', role: 'textbox', name: 'Password' }] },
      },
    },
  },
  {
    kind: 'model',
    toolCalls: [
      {
        id: 'c2',
        name: 'browser.act',
        args: { revision: 'r1', element: 'e7', action: 'fill', text: 'hunter2' },
      },
    ],
  },
  { kind: 'model', toolCalls: [{ id: 'c3', name: 'browser.observe', args: {} }] },
];

describe('the note a retried run starts with', () => {
  it('lists each dispatched effect with its target and outcome, never a typed text, never an observe', () => {
    const effects = earlierEffects(
      [
        entry(1, 'browser.navigate', 'completed', { ok: true, result: {} }),
        entry(2, 'browser.act', 'outcome_unknown', {
          ok: false,
          code: 'outcome_unknown',
          message: 'no answer',
        }),
        entry(3, 'browser.observe', 'completed', { ok: true, result: {} }),
      ],
      new Map([[1, transcript]]),
    );
    expect(effects).toEqual([
      { attempt: 1, step: 1, tool: 'browser.navigate', target: 'https://a.test/login', outcome: 'completed' },
      {
        attempt: 1,
        step: 2,
        tool: 'browser.act',
        target: 'fill textbox "Password"',
        outcome: 'outcome_unknown',
      },
    ]);
    const note = retryNote(2, effects);
    expect(note?.text).toContain('attempt 2');
    expect(note?.text).toContain('https://a.test/login');
    expect(JSON.stringify(note)).not.toContain('hunter2');
  });

  it('leaves out a call only started, and writes no note when nothing was dispatched', () => {
    const effects = earlierEffects([entry(1, 'browser.navigate', 'started')], new Map([[1, transcript]]));
    expect(effects).toEqual([]);
    expect(retryNote(2, effects)).toBeUndefined();
  });
});
