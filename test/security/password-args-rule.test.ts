import { describe, expect, it } from 'vitest';
import type { ToolCall, TranscriptEntry } from '../../libs/runtime/model.js';
import { argumentSealer, recordTurn, revealCall, SECRET_MARKER } from '../../libs/runtime/secret-args.js';

const observed: TranscriptEntry = {
  kind: 'tool',
  callId: 'c0',
  name: 'browser.observe',
  outcome: {
    ok: true,
    result: {
      observation: {
        revision: 'rev1',
        elements: [
          { ref: 'e1', role: 'textbox', name: 'User', state: { value: 'ada' } },
          { ref: 'e2', role: 'textbox', name: 'Password', state: { value_present: false } },
          { ref: 'e3', role: 'textbox', name: 'Code', state: { value_present: true } },
        ],
      },
    },
  },
};

const fill = (id: string, element: string, text: string, revision = 'rev1'): ToolCall => ({
  id,
  name: 'browser.act',
  args: { revision, element, action: 'fill', text },
});

describe('the arguments a run records of a call (passwords)', () => {
  it('records the text of a fill into a password or one-time-code field as [secret], and no other', () => {
    const turn = recordTurn(
      [fill('a', 'e1', 'ada lovelace'), fill('b', 'e2', 'hunter2'), fill('c', 'e3', '123456')],
      [],
      [observed],
    );
    expect(turn.toolCalls.map((call) => call.args.text)).toEqual([
      'ada lovelace',
      SECRET_MARKER,
      SECRET_MARKER,
    ]);
    expect(Object.fromEntries(turn.secrets)).toEqual({ b: { text: 'hunter2' }, c: { text: '123456' } });
    // The dispatched call gets its text back.
    expect(revealCall(turn.toolCalls[1] as ToolCall, { text: 'hunter2' }).args.text).toBe('hunter2');
  });

  it('judges the target in the observation of the revision the act names', () => {
    // e2 of another revision is no known field: its text is not taken for a secret.
    const turn = recordTurn([fill('a', 'e2', 'plain', 'rev0')], [], [observed]);
    expect(turn.toolCalls[0]?.args.text).toBe('plain');
  });

  it('records any argument a tool definition marks secret as [secret]', () => {
    const turn = recordTurn(
      [{ id: 'k', name: 'vault.store', args: { label: 'bank', token: 'tok-123' } }],
      [{ name: 'vault.store', description: 'keep a token', parameters: {}, secretArguments: ['token'] }],
      [],
    );
    expect(turn.toolCalls[0]?.args).toEqual({ label: 'bank', token: SECRET_MARKER });
  });

  it('records a marked argument of a deferred tool called through tool.call as [secret]', () => {
    const turn = recordTurn(
      [
        {
          id: 'd',
          name: 'tool.call',
          args: { name: 'vault.store', arguments: { label: 'x', token: 'tok-9' } },
        },
      ],
      [{ name: 'vault.store', description: 'keep a token', parameters: {}, secretArguments: ['token'] }],
      [],
    );
    expect(turn.toolCalls[0]?.args).toEqual({
      name: 'vault.store',
      arguments: { label: 'x', token: SECRET_MARKER },
    });
    expect(turn.secrets.get('d')).toEqual({ token: 'tok-9' });
  });

  it('seals secret values for their call only, under the run-bound key', () => {
    const sealer = argumentSealer('deployment-secret', 'run_1');
    const blob = sealer.seal('call_1', { text: 'hunter2' });
    expect(blob).not.toContain('hunter2');
    expect(sealer.unseal('call_1', blob)).toEqual({ text: 'hunter2' });
    expect(sealer.unseal('call_2', blob)).toBeUndefined();
    expect(argumentSealer('deployment-secret', 'run_2').unseal('call_1', blob)).toBeUndefined();
  });
});
