import { describe, expect, it } from 'vitest';
import { JobLocks, lockVerdict } from '../../queues/job-locks.js';

const LOCK = { lockDurationMs: 10_000, answerBoundMs: 2_000, redisUp: true };
const fresh = { confirmedAtMs: 0, failures: 0, lost: false };

describe('the lock-risk rule: a call goes out only on a job lock that outlasts its mark', () => {
  it('dispatches while more than one answer bound of the lock is surely left', () => {
    // Set at most 2 s before its answer at 0, the lock lasts at least until 8 s.
    expect(lockVerdict(fresh, 0, LOCK)).toBe('dispatch');
    expect(lockVerdict(fresh, 5_999, LOCK)).toBe('dispatch');
  });

  it('waits for the renewal that is due once one bound or less is left, and stops at the lapse', () => {
    expect(lockVerdict(fresh, 6_000, LOCK)).toBe('wait');
    expect(lockVerdict(fresh, 7_999, LOCK)).toBe('wait');
    expect(lockVerdict(fresh, 8_000, LOCK)).toBe('stop');
  });

  it('stops once a renewal failed: the next attempt comes half a lock later, past the lapse', () => {
    expect(lockVerdict({ ...fresh, failures: 1 }, 1_000, LOCK)).toBe('stop');
  });

  it('stops while Redis does not answer, and on a lock Redis said is lost', () => {
    expect(lockVerdict(fresh, 0, { ...LOCK, redisUp: false })).toBe('stop');
    expect(lockVerdict({ ...fresh, lost: true }, 0, LOCK)).toBe('stop');
  });

  it('counts the answer bound against a short lock: a lock of two bounds never dispatches', () => {
    expect(lockVerdict(fresh, 0, { ...LOCK, lockDurationMs: 4_000 })).toBe('wait');
  });
});

describe('the lock book of a worker', () => {
  it('follows claims, renewals, failed renewals and lost locks per job', () => {
    let now = 0;
    const locks = new JobLocks(10_000, () => now);
    const limits = { answerBoundMs: 2_000, redisUp: true };
    locks.claimed('a');
    locks.claimed('b');
    expect(locks.verdict('a', limits)).toBe('dispatch');
    now = 5_000;
    locks.renewalFailed();
    expect([locks.verdict('a', limits), locks.verdict('b', limits)]).toEqual(['stop', 'stop']);
    now = 6_000;
    locks.renewed(['a']);
    expect([locks.verdict('a', limits), locks.verdict('b', limits)]).toEqual(['dispatch', 'stop']);
    locks.lost(['a']);
    locks.renewed(['a']);
    expect(locks.verdict('a', limits)).toBe('stop');
    locks.released('b');
    expect(locks.verdict('b', limits)).toBe('stop');
    expect(locks.verdict('unknown', limits)).toBe('stop');
  });
});
