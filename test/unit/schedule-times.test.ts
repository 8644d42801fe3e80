import { describe, expect, it } from 'vitest';
import {
  dueKey,
  dueTimesAfter,
  missedBetween,
  nextDueAfter,
  timingProblem,
  upcomingDueTimes,
} from '../../queues/schedule-times.js';

const NEW_YORK = 'America/New_York';
/** 2026-11-01: New York's clocks go from 02:00 EDT back to 01:00 EST, so 01:00–01:59 comes twice. */
const BEFORE_FALL_BACK = Date.UTC(2026, 9, 31, 12);
const MINUTE = 60_000;

const iso = (ms: number) => new Date(ms).toISOString();

describe('next due times', () => {
  it('follows a cron in its time zone, not in UTC', () => {
    const timing = { cron: '0 7 * * *', timezone: 'Europe/Berlin' };
    const [first, second] = dueTimesAfter(timing, Date.UTC(2026, 5, 1, 12), 2);
    expect(iso(first as number)).toBe('2026-06-02T05:00:00.000Z');
    expect(iso(second as number)).toBe('2026-06-03T05:00:00.000Z');
  });

  it('steps an every schedule from the scheduler next due time, as BullMQ fires it', () => {
    expect(upcomingDueTimes({ every_ms: 5 * MINUTE, timezone: 'UTC' }, 1_000_123, 3)).toEqual([
      1_000_123,
      1_000_123 + 5 * MINUTE,
      1_000_123 + 10 * MINUTE,
    ]);
  });

  it('lists the scheduler next due time first, then the cron after it', () => {
    const timing = { cron: '*/15 * * * *', timezone: 'UTC' };
    const first = Date.UTC(2026, 0, 1, 10, 15);
    expect(upcomingDueTimes(timing, first, 3).map(iso)).toEqual([
      '2026-01-01T10:15:00.000Z',
      '2026-01-01T10:30:00.000Z',
      '2026-01-01T10:45:00.000Z',
    ]);
  });
});

describe('a repeated daylight-saving hour', () => {
  const halfHourly = { cron: '*/30 * * * *', timezone: NEW_YORK };

  it('gives the second 01:30 the same due key as the first, so its submit answers the first run', () => {
    const firstOneThirty = Date.UTC(2026, 10, 1, 5, 30); // 01:30 EDT
    const secondOneThirty = Date.UTC(2026, 10, 1, 6, 30); // 01:30 EST
    expect(dueKey(halfHourly, firstOneThirty)).toBe('2026-11-01T01:30:00');
    expect(dueKey(halfHourly, secondOneThirty)).toBe(dueKey(halfHourly, firstOneThirty));
  });

  it('lists each wall-clock time of the repeated hour once', () => {
    const times = dueTimesAfter(halfHourly, Date.UTC(2026, 10, 1, 4, 45), 5).map((ms) =>
      dueKey(halfHourly, ms),
    );
    expect(times).toEqual([
      '2026-11-01T01:00:00',
      '2026-11-01T01:30:00',
      '2026-11-01T02:00:00',
      '2026-11-01T02:30:00',
      '2026-11-01T03:00:00',
    ]);
  });

  it('fires a daily 01:30 once on the day the hour repeats', () => {
    const timing = { cron: '30 1 * * *', timezone: NEW_YORK };
    const keys = dueTimesAfter(timing, BEFORE_FALL_BACK, 3).map((ms) => dueKey(timing, ms));
    expect(keys).toEqual(['2026-11-01T01:30:00', '2026-11-02T01:30:00', '2026-11-03T01:30:00']);
  });

  it('does not count the repeated times as missed', () => {
    const firstOneO = Date.UTC(2026, 10, 1, 5, 0); // 01:00 EDT
    // Between 01:00 EDT and 02:00 EST the wall clock shows 01:30, 01:00 and 01:30 again: one new time.
    expect(missedBetween(halfHourly, firstOneO, Date.UTC(2026, 10, 1, 7, 0))).toBe(1);
  });

  it('keys an every schedule by the instant, whatever the zone', () => {
    expect(dueKey({ every_ms: MINUTE, timezone: NEW_YORK }, 1_234_567)).toBe('1234567');
  });
});

describe('missed due times', () => {
  const everyTwoSeconds = { every_ms: 2_000, timezone: 'UTC' };

  it('counts the due times strictly between the one firing and now', () => {
    expect(missedBetween(everyTwoSeconds, 10_000, 10_500)).toBe(0);
    expect(missedBetween(everyTwoSeconds, 10_000, 12_000)).toBe(0);
    expect(missedBetween(everyTwoSeconds, 10_000, 12_001)).toBe(1);
    expect(missedBetween(everyTwoSeconds, 10_000, 21_000)).toBe(5);
  });

  it('reckons a long cron outage from the pattern, past the due times it counts one by one', () => {
    const minutely = { cron: '* * * * *', timezone: 'UTC' };
    const weekAgo = Date.UTC(2026, 0, 1);
    // Every minute of a week, less the one firing and the one at the end.
    expect(missedBetween(minutely, weekAgo, weekAgo + 7 * 24 * 3_600_000)).toBe(7 * 24 * 60 - 1);
  });

  it('counts a cron outage by its own due times', () => {
    const hourly = { cron: '0 * * * *', timezone: 'UTC' };
    expect(missedBetween(hourly, Date.UTC(2026, 0, 1, 0), Date.UTC(2026, 0, 1, 5, 30))).toBe(5);
  });
});

describe('the minimum interval', () => {
  const from = Date.UTC(2026, 0, 1);

  it('refuses an every shorter than the minimum and takes one as long', () => {
    expect(timingProblem({ every_ms: 59_999, timezone: 'UTC' }, MINUTE, from)).toMatch(/at least 60000 ms/);
    expect(timingProblem({ every_ms: MINUTE, timezone: 'UTC' }, MINUTE, from)).toBeUndefined();
  });

  it('refuses a cron whose fires come closer than the minimum', () => {
    expect(timingProblem({ cron: '*/30 * * * * *', timezone: 'UTC' }, MINUTE, from)).toMatch(
      /30000 ms apart/,
    );
    expect(timingProblem({ cron: '* * * * *', timezone: 'UTC' }, MINUTE, from)).toBeUndefined();
    expect(timingProblem({ cron: '* * * * *', timezone: 'UTC' }, 2 * MINUTE, from)).toMatch(/60000 ms apart/);
  });

  it('measures a cron across a daylight-saving change by its wall clock', () => {
    const halfHourly = { cron: '*/30 * * * *', timezone: NEW_YORK };
    expect(timingProblem(halfHourly, 30 * MINUTE, BEFORE_FALL_BACK)).toBeUndefined();
  });

  it('takes a lowered minimum (a test setting)', () => {
    expect(timingProblem({ every_ms: 2_000, timezone: 'UTC' }, 1_000, from)).toBeUndefined();
  });

  it('refuses an unknown zone, a cron that does not parse, and both timings at once', () => {
    expect(timingProblem({ cron: '0 7 * * *', timezone: 'Mars/Olympus' }, MINUTE, from)).toMatch(/IANA/);
    expect(timingProblem({ cron: 'every day', timezone: 'UTC' }, MINUTE, from)).toMatch(/^cron:/);
    expect(timingProblem({ cron: '0 7 * * *', every_ms: MINUTE, timezone: 'UTC' }, MINUTE, from)).toMatch(
      /exactly one/,
    );
  });

  it('answers the next due time strictly after the one given', () => {
    const hourly = { cron: '0 * * * *', timezone: 'UTC' };
    expect(nextDueAfter(hourly, Date.UTC(2026, 0, 1, 5))).toBe(Date.UTC(2026, 0, 1, 6));
  });
});
