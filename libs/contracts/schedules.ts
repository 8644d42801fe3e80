import { z } from 'zod';
import { boundedJson } from './bounded-json.js';
import { recordIdSchema } from './ids.js';
import { fileIdSchema, RUN_INPUT_FILES_MAX } from './run-files.js';
import { RUN_INPUT_MAX_CHARS, RUN_SCRIPT_BOUNDS } from './runs.js';

/**
 * Schedules: a run submitted again and again, by cron or every so many milliseconds, built on
 * BullMQ's job schedulers. What a fire decided is one of these outcomes, counted per schedule and
 * by `leasehold_schedule_fires_total`.
 * - `fired`: the due time's run was submitted;
 * - `skipped_overlap`: the schedule's previous run had not ended (overlap `skip`, or `queue` with a
 *   fire already held);
 * - `queued`: held until the previous run ends (overlap `queue`, at most one held);
 * - `missed`: due while no worker ran, and not the one fired on recovery;
 * - `capped`: the schedule's runs of that day (UTC) had spent its daily cost cap.
 */
export const SCHEDULE_FIRE_OUTCOMES = ['fired', 'skipped_overlap', 'queued', 'missed', 'capped'] as const;
export type ScheduleFireOutcome = (typeof SCHEDULE_FIRE_OUTCOMES)[number];

export const scheduleOverlapSchema = z.enum(['skip', 'queue']);
export type ScheduleOverlap = z.output<typeof scheduleOverlapSchema>;

const usdAmount = z.string().regex(/^\d{1,7}(\.\d{1,6})?$/, 'a USD amount such as "30" or "0.15"');

/**
 * A schedule's own limits (ADR-0130 d3: schedules keep their own limits). Each one given replaces
 * the run's ordinary limit; none may pass the browser-task overlay.
 */
export const scheduleLimitsSchema = z.strictObject({
  max_steps: z.number().int().positive().optional(),
  max_model_calls: z.number().int().positive().optional(),
  max_tool_calls: z.number().int().positive().optional(),
  max_cost_usd: usdAmount.optional(),
});
export type ScheduleLimits = z.output<typeof scheduleLimitsSchema>;

/** The run each fire submits: to which session, with what input, under which limits. */
export const scheduleRunSchema = z.strictObject({
  session_id: recordIdSchema,
  input: z.string().min(1).max(RUN_INPUT_MAX_CHARS),
  script: boundedJson(RUN_SCRIPT_BOUNDS, z.unknown()).optional(),
  /** Each run's deadline, from its submission. */
  timeout_ms: z
    .number()
    .int()
    .min(1_000)
    .max(24 * 3600_000)
    .default(3600_000),
  limits: scheduleLimitsSchema.optional(),
  /**
   * Uploaded files each run lists (its `upload` acts may set a file input to them); the schedule
   * holds them while it exists, so they outlast their 7 days.
   */
  files: z.array(fileIdSchema).max(RUN_INPUT_FILES_MAX).optional(),
});
export type ScheduleRun = z.output<typeof scheduleRunSchema>;

/** When a schedule fires: a cron pattern in a time zone, or every so many milliseconds. */
export const scheduleTimingSchema = z.strictObject({
  /** Five fields (or six, seconds first), read in `timezone`. */
  cron: z.string().min(1).max(128).optional(),
  every_ms: z
    .number()
    .int()
    .positive()
    .max(366 * 24 * 3600_000)
    .optional(),
  /** An IANA time zone such as Europe/Berlin; a cron's hours are that zone's. */
  timezone: z.string().min(1).max(64).default('UTC'),
});

/** What the stored schedule holds of its caller's request (everything a PATCH may change). */
export const scheduleSpecSchema = scheduleTimingSchema.extend({
  run: scheduleRunSchema,
  overlap: scheduleOverlapSchema.default('skip'),
  /** The most a day's (UTC) runs of this schedule may cost; fires past it are skipped `capped`. */
  daily_cost_cap_usd: usdAmount.nullable().default(null),
});
export type ScheduleSpec = z.output<typeof scheduleSpecSchema>;

export const createScheduleSchema = scheduleSpecSchema.refine(
  (spec) => (spec.cron === undefined) !== (spec.every_ms === undefined),
  { message: 'give exactly one of cron and every_ms' },
);

export const patchScheduleSchema = z.strictObject({
  cron: z.string().min(1).max(128).optional(),
  every_ms: scheduleTimingSchema.shape.every_ms,
  timezone: z.string().min(1).max(64).optional(),
  run: scheduleRunSchema.partial().strict().optional(),
  overlap: scheduleOverlapSchema.optional(),
  daily_cost_cap_usd: usdAmount.nullable().optional(),
});
export type PatchSchedule = z.output<typeof patchScheduleSchema>;

export const scheduleCountsSchema = z.object(
  Object.fromEntries(SCHEDULE_FIRE_OUTCOMES.map((outcome) => [outcome, z.number().int().nonnegative()])) as {
    [Outcome in ScheduleFireOutcome]: z.ZodNumber;
  },
);

/** The run as a view shows it (the script as stored, checked when it was given). */
const scheduleRunViewSchema = scheduleRunSchema.extend({ script: z.unknown().optional() });

export const scheduleViewSchema = z.object({
  id: recordIdSchema,
  cron: z.string().nullable(),
  every_ms: z.number().int().nullable(),
  timezone: z.string(),
  run: scheduleRunViewSchema,
  overlap: scheduleOverlapSchema,
  daily_cost_cap_usd: z.string().nullable(),
  paused: z.boolean(),
  /**
   * `requested` (paused by a call), `key_revoked` (the key that made it was revoked) or
   * `session_gone` (its runs' session no longer exists).
   */
  paused_reason: z.enum(['requested', 'key_revoked', 'session_gone']).nullable(),
  /** The next due times (ms since the epoch), soonest first; none while paused. */
  next_due_at_ms: z.array(z.number().int()),
  /** The due time held until the previous run ends (overlap `queue`), if any. */
  held_due_at_ms: z.number().int().nullable(),
  counts: scheduleCountsSchema,
  created_at_ms: z.number().int(),
});
export type ScheduleView = z.output<typeof scheduleViewSchema>;

/** What a fired run carries in its input: the schedule that made it and the time it was due. */
export const scheduledRunMarkSchema = z.object({ id: recordIdSchema, due_at_ms: z.number().int() });
export type ScheduledRunMark = z.output<typeof scheduledRunMarkSchema>;
