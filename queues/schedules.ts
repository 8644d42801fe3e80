import { Queue } from 'bullmq';
import { z } from 'zod';
import { recordIdSchema } from '../libs/contracts/index.js';
import type { RedisClient } from '../libs/store/redis-client.js';
import { isRedisUnreachable } from '../libs/telemetry/redis-link.js';
import { repeatOptions, type ScheduleTiming } from './schedule-times.js';

/** The queue of schedule fires: one BullMQ job scheduler per schedule, its jobs the fires. */
export const SCHEDULES_QUEUE = 'schedules';

/** A fire's job (the scheduler's template) or a held fire's (overlap `queue`). */
export const scheduleJobSchema = z.object({ scheduleId: recordIdSchema });
export type ScheduleJob = z.output<typeof scheduleJobSchema>;

/** Job names: a scheduler's fire, and the job that submits a fire held behind a run still going. */
export const FIRE_JOB = 'fire';
export const HELD_JOB = 'held';

export type SchedulesQueue = Queue<ScheduleJob, string, string>;

export function createSchedulesQueue(connection: RedisClient, prefix: string): SchedulesQueue {
  const queue = new Queue<ScheduleJob, string, string>(SCHEDULES_QUEUE, {
    connection,
    prefix,
    defaultJobOptions: { attempts: 1, removeOnComplete: { count: 1_000 }, removeOnFail: { count: 1_000 } },
  });
  queue.on('error', (error) => {
    if (!isRedisUnreachable(error)) process.emitWarning(`schedules queue: ${error.message}`);
  });
  return queue;
}

/**
 * The schedule's BullMQ job scheduler, made or changed (BullMQ keeps one per id; a change replaces
 * its next job). Its fires are `FIRE_JOB` jobs with the schedule's id; the due time is the job's
 * `prevMillis`.
 */
export async function upsertScheduler(
  queue: SchedulesQueue,
  scheduleId: string,
  timing: ScheduleTiming,
): Promise<void> {
  await queue.upsertJobScheduler(scheduleId, repeatOptions(timing), {
    name: FIRE_JOB,
    data: { scheduleId },
    opts: { attempts: 1, removeOnComplete: { count: 100 }, removeOnFail: { count: 100 } },
  });
}

export async function removeScheduler(queue: SchedulesQueue, scheduleId: string): Promise<void> {
  await queue.removeJobScheduler(scheduleId);
}

/** The scheduler's next due time, or undefined when it has none (paused, removed). */
export async function schedulerNextMs(
  queue: SchedulesQueue,
  scheduleId: string,
): Promise<number | undefined> {
  const scheduler = await queue.getJobScheduler(scheduleId);
  return typeof scheduler?.next === 'number' ? scheduler.next : undefined;
}

/**
 * The due time a fire's job stands for: BullMQ's `prevMillis`, which is also the last part of the
 * job's id (`repeat:<scheduler>:<ms>`).
 */
export function dueMsOfJob(job: {
  id?: string | undefined;
  opts: { prevMillis?: number };
}): number | undefined {
  if (typeof job.opts.prevMillis === 'number') return job.opts.prevMillis;
  const last = job.id?.split(':').at(-1);
  return last && /^\d+$/.test(last) ? Number(last) : undefined;
}
