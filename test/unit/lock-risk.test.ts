import { describe, expect, it } from 'vitest';
import { JobLocks, lockVerdict } from '../../queues/job-locks.js';

const LOCK = { lockDurationMs: 10_000, answerBoundMs: 2_000, redisUp: true };
const fresh = { confirmedAtMs: 0, failures: 0, lost: false };

describe('the lock-risk rule: a call goes out only on a job lock that outlasts its mark', () => {
  it('dispatches while more than one answer bound of the lock is surely left', () => {
    // Surely set after 0 (the renewal was sent then), the lock lasts at least until 10 s.
    expect(lockVerdict(fresh, 0, LOCK)).toBe('dispatch');
    expect(lockVerdict(fresh, 7_999, LOCK)).toBe('dispatch');
  });

  it('waits for the renewal that is due once one bound or less is left, and stops at the lapse', () => {
    expect(lockVerdict(fresh, 8_000, LOCK)).toBe('wait');
    expect(lockVerdict(fresh, 9_999, LOCK)).toBe('wait');
    expect(lockVerdict(fresh, 10_000, LOCK)).toBe('stop');
  });

  it('keeps at most a quarter lock as the margin, so a short lock still dispatches between renewals', () => {
    const short = { ...LOCK, lockDurationMs: 2_000 };
    expect(lockVerdict(fresh, 1_499, short)).toBe('dispatch');
    expect(lockVerdict(fresh, 1_500, short)).toBe('wait');
  });

  it('stops once a renewal failed: the next attempt may come after the lapse', () => {
    expect(lockVerdict({ ...fresh, failures: 1 }, 1_000, LOCK)).toBe('stop');
  });

  it('stops while Redis does not answer, and on a lock Redis said is lost', () => {
    expect(lockVerdict(fresh, 0, { ...LOCK, redisUp: false })).toBe('stop');
    expect(lockVerdict({ ...fresh, lost: true }, 0, LOCK)).toBe('stop');
  });
});

describe('the lock book of a worker', () => {
  it('follows claims, renewals by the time they were sent, failed renewals and lost locks per job', () => {
    let now = 0;
    const locks = new JobLocks(10_000, () => now);
    const limits = { answerBoundMs: 2_000, redisUp: true };
    locks.claimed('a', 0);
    locks.claimed('b', 0);
    expect(locks.verdict('a', limits)).toBe('dispatch');
    now = 5_000;
    locks.renewalFailed(['a', 'b']);
    expect([locks.verdict('a', limits), locks.verdict('b', limits)]).toEqual(['stop', 'stop']);
    now = 9_000;
    locks.renewed(['a'], 6_000);
    expect([locks.verdict('a', limits), locks.verdict('b', limits)]).toEqual(['dispatch', 'stop']);
    locks.lost(['a']);
    locks.renewed(['a'], 9_000);
    expect(locks.verdict('a', limits)).toBe('stop');
    locks.released('b');
    expect(locks.verdict('b', limits)).toBe('stop');
    expect(locks.verdict('unknown', limits)).toBe('stop');
  });
});
