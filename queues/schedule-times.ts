import { getNextMillis } from 'bullmq';

/**
 * A schedule's due times, computed by BullMQ's own next-time rule (`getNextMillis`, cron-parser
 * underneath) so that what the API shows is what the job scheduler fires — no cron of our own.
 */
export interface ScheduleTiming {
  cron?: string | undefined;
  every_ms?: number | undefined;
  timezone: string;
}

/**
 * How many fires the minimum-interval check walks from the first: a pattern's closest fires come
 * within its first few hundred (a minute-cron's whole hour, a seconds-cron's first minutes).
 */
const GAP_CHECK_FIRES = 240;

/** The longest count of due times walked at once (missed ones after a long outage, a listing). */
const MAX_WALK = 100_000;

/** BullMQ's repeat options for a timing. */
export function repeatOptions(timing: ScheduleTiming): { pattern?: string; every?: number; tz?: string } {
  if (timing.cron !== undefined) return { pattern: timing.cron, tz: timing.timezone };
  if (timing.every_ms !== undefined) return { every: timing.every_ms };
  throw new RangeError('a schedule needs a cron or every_ms');
}

/** The first due time strictly after `afterMs`. */
export function nextDueAfter(timing: ScheduleTiming, afterMs: number): number {
  const next = getNextMillis(afterMs, repeatOptions(timing));
  if (next === undefined || !Number.isFinite(next))
    throw new RangeError(`the cron "${timing.cron}" has no time after ${new Date(afterMs).toISOString()}`);
  return next;
}

/**
 * A due time's identity, which keys its fire's submit: for a cron, its wall-clock time in the
 * schedule's zone, so the hour a daylight-saving change repeats fires once (its second 01:30 is the
 * first's); for `every`, the instant itself.
 */
export function dueKey(timing: ScheduleTiming, dueMs: number): string {
  if (timing.cron === undefined) return String(dueMs);
  return wallClock(dueMs, timing.timezone);
}

const wallClockFormats = new Map<string, Intl.DateTimeFormat>();

/** `2026-11-01T01:30:00` in `timezone`, without its offset. */
export function wallClock(ms: number, timezone: string): string {
  let format = wallClockFormats.get(timezone);
  if (!format) {
    format = new Intl.DateTimeFormat('en-CA', {
      timeZone: timezone,
      hourCycle: 'h23',
      year: 'numeric',
      month: '2-digit',
      day: '2-digit',
      hour: '2-digit',
      minute: '2-digit',
      second: '2-digit',
    });
    wallClockFormats.set(timezone, format);
  }
  const part = Object.fromEntries(format.formatToParts(ms).map((piece) => [piece.type, piece.value]));
  return `${part.year}-${part.month}-${part.day}T${part.hour}:${part.minute}:${part.second}`;
}

/** The next `count` due times after `afterMs`, a repeated wall-clock time listed once. */
export function dueTimesAfter(timing: ScheduleTiming, afterMs: number, count: number): number[] {
  const times: number[] = [];
  const seen = new Set<string>();
  let cursor = afterMs;
  for (let walked = 0; times.length < count && walked < MAX_WALK; walked += 1) {
    cursor = nextDueAfter(timing, cursor);
    const key = dueKey(timing, cursor);
    if (seen.has(key)) continue;
    seen.add(key);
    times.push(cursor);
  }
  return times;
}

/**
 * How many due times of a cron are counted one by one before the rest are reckoned from their mean
 * gap: a step costs cron-parser about half a millisecond, and a week of a minute-cron is ten
 * thousand steps, which the run worker's event loop (its job locks, its upkeep) cannot spare.
 */
export const MISSED_COUNTED_MAX = 1_000;

/**
 * How many due times fall strictly between `dueMs` (the one firing) and `nowMs`: those a worker
 * that was away will never fire (BullMQ schedules the next one after now), counted `missed`.
 * Exact for `every`, and for a cron up to {@link MISSED_COUNTED_MAX}; past that, estimated.
 */
export function missedBetween(timing: ScheduleTiming, dueMs: number, nowMs: number): number {
  if (timing.every_ms !== undefined) return Math.max(0, Math.ceil((nowMs - dueMs) / timing.every_ms) - 1);
  const seen = new Set<string>([dueKey(timing, dueMs)]);
  let missed = 0;
  let cursor = dueMs;
  for (let walked = 0; walked < MISSED_COUNTED_MAX; walked += 1) {
    cursor = nextDueAfter(timing, cursor);
    if (cursor >= nowMs) return missed;
    const key = dueKey(timing, cursor);
    if (seen.has(key)) continue;
    seen.add(key);
    missed += 1;
  }
  const meanGapMs = (cursor - dueMs) / MISSED_COUNTED_MAX;
  return missed + Math.max(0, Math.ceil((nowMs - cursor) / meanGapMs) - 1);
}

/**
 * Why a timing may not be used, or undefined: an unknown zone, a cron that does not parse or never
 * fires, or two fires closer than `minIntervalMs` (checked over the next fires from `fromMs`).
 */
export function timingProblem(
  timing: ScheduleTiming,
  minIntervalMs: number,
  fromMs: number,
): string | undefined {
  if ((timing.cron === undefined) === (timing.every_ms === undefined))
    return 'give exactly one of cron and every_ms';
  try {
    new Intl.DateTimeFormat('en', { timeZone: timing.timezone });
  } catch {
    return `timezone: "${timing.timezone}" is not an IANA time zone`;
  }
  if (timing.every_ms !== undefined) {
    return timing.every_ms < minIntervalMs
      ? `every_ms: at least ${minIntervalMs} ms between fires, got ${timing.every_ms}`
      : undefined;
  }
  let times: number[];
  try {
    times = dueTimesAfter(timing, fromMs, GAP_CHECK_FIRES);
  } catch (error) {
    return `cron: ${(error as Error).message}`;
  }
  if (times.length === 0) return `cron: "${timing.cron}" never fires`;
  for (let index = 1; index < times.length; index += 1) {
    const gapMs = (times[index] as number) - (times[index - 1] as number);
    if (gapMs < minIntervalMs)
      return `cron: at least ${minIntervalMs} ms between fires, "${timing.cron}" fires ${gapMs} ms apart`;
  }
  return undefined;
}

/**
 * The due times a schedule's view shows, from the scheduler's next (`firstMs`): an `every` steps
 * from it as BullMQ will; a cron walks on from it.
 */
export function upcomingDueTimes(timing: ScheduleTiming, firstMs: number, count: number): number[] {
  if (count <= 0) return [];
  const everyMs = timing.every_ms;
  if (everyMs !== undefined) return Array.from({ length: count }, (_, index) => firstMs + index * everyMs);
  return [firstMs, ...dueTimesAfter(timing, firstMs, count - 1)];
}
