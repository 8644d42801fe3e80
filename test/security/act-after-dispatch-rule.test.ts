import { describe, expect, it } from 'vitest';
import { errorFromAnswer } from '../../libs/provider/index.js';

const answer = (code: string, extra: Record<string, unknown>) => ({
  error: { code, message: 'from the service', ...extra },
});

/** How the run side reads an effect's refusal that says whether it was dispatched. */
describe('an effect refusal that says whether it was dispatched', () => {
  it('keeps url_disallowed and invalid_arguments answered after dispatch, with the told sequence', () => {
    for (const code of ['url_disallowed', 'invalid_arguments'])
      for (const operation of ['navigate', 'act'] as const) {
        const error = errorFromAnswer(operation, 409, answer(code, { dispatched: true, sequence: 7 }));
        expect(error).toMatchObject({ code, retryable: false, facts: { dispatched: true, sequence: 7 } });
      }
  });

  it('keeps invalid_arguments refused before dispatch instead of calling its outcome unknown', () => {
    const error = errorFromAnswer('act', 422, answer('invalid_arguments', { dispatched: false }));
    expect(error).toMatchObject({ code: 'invalid_arguments', facts: { dispatched: false } });
  });

  it('still calls an answer without the mark, or dispatched without a sequence, outcome_unknown', () => {
    expect(errorFromAnswer('act', 422, answer('invalid_arguments', {})).code).toBe('outcome_unknown');
    expect(errorFromAnswer('act', 409, answer('url_disallowed', { dispatched: true })).code).toBe(
      'outcome_unknown',
    );
    // An unknown outcome stays unknown, whatever else the answer says.
    expect(
      errorFromAnswer('act', 502, answer('outcome_unknown', { dispatched: true, sequence: 3 })).code,
    ).toBe('outcome_unknown');
  });
});
