import { describe, expect, it } from 'vitest';
import { judgeHandedOverCall } from '../../libs/lease/handover.js';
import type { EffectState } from '../../libs/lease/ports.js';

const lease = (sequence: number, state?: EffectState, code?: string) => ({
  sequence,
  lastEffect: state ? { state, code } : undefined,
});

/** ADR-0127 d3, amended: what a lease's record tells a run's next owner of the effect it was handed. */
describe('judgeHandedOverCall', () => {
  it('an effect that never reached a live lease is skipped past; a lease that is not live takes no late copy', () => {
    expect(judgeHandedOverCall(lease(4, 'applied'), 5, true)).toEqual({ call: 'skip' });
    expect(judgeHandedOverCall(lease(4, 'applied'), 5, false)).toEqual({ call: 'not_applied', code: null });
    expect(judgeHandedOverCall(lease(0), 1, true)).toEqual({ call: 'skip' });
  });

  it('the carried sequence reached: its recorded end answers', () => {
    expect(judgeHandedOverCall(lease(5, 'applied'), 5, true)).toEqual({ call: 'applied', code: null });
    expect(judgeHandedOverCall(lease(5, 'refused', 'navigation_failed'), 5, true)).toEqual({
      call: 'refused',
      code: 'navigation_failed',
    });
    // A skip already made (a next owner stopped right after it) reads the same again.
    expect(judgeHandedOverCall(lease(5, 'skipped'), 5, true)).toEqual({ call: 'not_applied', code: null });
  });

  it('only where nothing can be told is it unknown', () => {
    // Still `dispatched`: the process serving it stopped before its end was recorded.
    expect(judgeHandedOverCall(lease(5, 'dispatched'), 5, false)).toEqual({ call: 'unknown', code: null });
    expect(judgeHandedOverCall(lease(5, 'unknown'), 5, true)).toEqual({ call: 'unknown', code: null });
    expect(judgeHandedOverCall(lease(5, 'refused'), 5, true)).toEqual({ call: 'unknown', code: null });
    // A record from before effects were recorded.
    expect(judgeHandedOverCall(lease(5), 5, true)).toEqual({ call: 'unknown', code: null });
    // The two sides disagree about the sequence.
    expect(judgeHandedOverCall(lease(7, 'applied'), 5, true)).toEqual({ call: 'unknown', code: null });
    expect(judgeHandedOverCall(lease(2, 'applied'), 5, true)).toEqual({ call: 'unknown', code: null });
  });
});
