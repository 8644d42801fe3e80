import { DelayedError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { dueKey, missedBetween } from '../../queues/schedule-times.js';
import {
  dueMsOfJob,
  HELD_JOB,
  removeScheduler,
  type ScheduleJob,
  type SchedulesQueue,
} from '../../queues/schedules.js';
import type { Config } from '../config/index.js';
import {
  ApiError,
  type RunView,
  runHasEnded,
  type ScheduleFireOutcome,
  usdToMicroUsd,
} from '../contracts/index.js';
import type { RunLifecycle } from '../runtime/run-lifecycle.js';
import {
  idempotentRunId,
  type RunStore,
  type SchedulePauseReason,
  type ScheduleRecord,
  type ScheduleStore,
} from '../store/index.js';
import { scheduleRunLimits } from './limits.js';

/** How often a held fire looks whether the run ahead of it has ended. */
export const HELD_POLL_MS = 1_000;

const DAY_MS = 24 * 3_600_000;

export interface ScheduleFireDeps {
  config: Pick<Config, 'limits'>;
  schedules: ScheduleStore;
  store: RunStore;
  lifecycle: Pick<RunLifecycle, 'followUp'>;
  queue: SchedulesQueue;
  /** Counts each decided due time by outcome (`leasehold_schedule_fires_total`). */
  counted(outcome: ScheduleFireOutcome, by: number): void;
  logger: Logger;
  now?: () => number;
}

/**
 * The schedules queue's processor, run by the run workers. A fire job stands for one due time:
 * decided once (`ScheduleStore.decide`) and submitted once (the run's Idempotency-Key is the
 * schedule and the due time), so a job processed twice, a restart or a clock change never makes a
 * second run. Returns what the due time came to, for the job's result.
 */
export function scheduleJobProcessor(deps: ScheduleFireDeps) {
  const now = deps.now ?? Date.now;
  return async (job: Job<ScheduleJob, string, string>, token?: string): Promise<string> => {
    if (job.name === HELD_JOB) return submitHeld(deps, job, token, now);
    const dueMs = dueMsOfJob(job);
    if (dueMs === undefined) throw new Error(`schedule job ${job.id} names no due time`);
    return fire(deps, job.data.scheduleId, dueMs, now);
  };
}

async function fire(
  deps: ScheduleFireDeps,
  scheduleId: string,
  dueMs: number,
  now: () => number,
): Promise<string> {
  const { schedules, store } = deps;
  const schedule = await schedules.get(undefined, scheduleId);
  if (!schedule) return 'gone';
  if (schedule.pausedReason) return 'paused';
  const key = dueKey(schedule.spec, dueMs);
  if (await schedules.decided(scheduleId, key)) return 'decided_before';
  // A schedule runs with its maker's authority: once that key is revoked it stops, paused; so
  // does one whose runs' session is gone (every fire would be refused).
  if (!(await store.apiKeyLineage(schedule.tenant, schedule.keyId)))
    return pause(deps, scheduleId, 'key_revoked');
  if (!(await store.getSession(schedule.tenant, schedule.spec.run.session_id)))
    return pause(deps, scheduleId, 'session_gone');
  const missedBefore = missedBetween(schedule.spec, dueMs, now());
  const decide = async (outcome: ScheduleFireOutcome): Promise<string> => {
    if (await schedules.decide(scheduleId, { dueKey: key, outcome, missedBefore })) {
      deps.counted(outcome, 1);
      if (missedBefore > 0) deps.counted('missed', missedBefore);
    }
    return outcome;
  };

  // A held due time goes before this one: until it is submitted, this one overlaps. Its job is
  // added again (the same id: one job) in case a crash came between holding it and adding it.
  if (schedule.heldDueMs !== null) {
    await addHeldJob(deps.queue, scheduleId, schedule.heldDueMs);
    return decide(schedule.heldDueMs === dueMs ? 'queued' : 'skipped_overlap');
  }
  // This due time's own run (submitted before a crash kept its decision) is no previous run.
  if (await previousRunGoing(store, schedule, fireRunId(schedule, key))) {
    if (schedule.spec.overlap === 'queue' && (await schedules.hold(scheduleId, dueMs))) {
      await addHeldJob(deps.queue, scheduleId, dueMs);
      return decide('queued');
    }
    return decide('skipped_overlap');
  }
  if (await overDailyCap(store, schedules, schedule, dueMs)) return decide('capped');
  await submitFire(deps, schedule, dueMs, key);
  return decide('fired');
}

async function pause(
  deps: ScheduleFireDeps,
  scheduleId: string,
  reason: SchedulePauseReason,
): Promise<string> {
  await deps.schedules.setPaused(scheduleId, reason);
  await removeScheduler(deps.queue, scheduleId);
  return 'paused';
}

/** The job that submits a held due time once the run ahead of it has ended; one per due time. */
async function addHeldJob(queue: SchedulesQueue, scheduleId: string, dueMs: number): Promise<void> {
  await queue.add(
    HELD_JOB,
    { scheduleId },
    { jobId: `held-${scheduleId}-${dueMs}`, delay: HELD_POLL_MS, removeOnComplete: true, removeOnFail: true },
  );
}

/** A held fire (overlap `queue`): submitted once the run ahead of it has ended, looked at again until then. */
async function submitHeld(
  deps: ScheduleFireDeps,
  job: Job<ScheduleJob, string, string>,
  token: string | undefined,
  now: () => number,
): Promise<string> {
  const schedule = await deps.schedules.get(undefined, job.data.scheduleId);
  if (!schedule || schedule.heldDueMs === null) return 'gone';
  if (schedule.pausedReason) return 'paused';
  if (await previousRunGoing(deps.store, schedule)) {
    await job.moveToDelayed(now() + HELD_POLL_MS, token);
    throw new DelayedError();
  }
  await submitFire(deps, schedule, schedule.heldDueMs, dueKey(schedule.spec, schedule.heldDueMs));
  await deps.schedules.release(schedule.id);
  return 'submitted';
}

async function previousRunGoing(
  store: RunStore,
  schedule: ScheduleRecord,
  ownRunId?: string,
): Promise<boolean> {
  if (!schedule.lastRunId || schedule.lastRunId === ownRunId) return false;
  const run = await store.getRun(schedule.lastRunId, schedule.tenant);
  return run !== undefined && !runHasEnded(run.status);
}

/** Whether the schedule's runs due on the same day (UTC) as `dueMs` have spent its daily cap. */
async function overDailyCap(
  store: RunStore,
  schedules: ScheduleStore,
  schedule: ScheduleRecord,
  dueMs: number,
): Promise<boolean> {
  const cap = schedule.spec.daily_cost_cap_usd;
  if (cap === null) return false;
  const dayStartMs = Math.floor(dueMs / DAY_MS) * DAY_MS;
  const runIds = await schedules.runIds(schedule.id, dayStartMs, dayStartMs + DAY_MS - 1);
  const runs = await Promise.all(runIds.map((runId) => store.getRun(runId, schedule.tenant)));
  const spentMicroUsd = runs.reduce((sum, run) => sum + (run?.usage.cost_micro_usd ?? 0), 0);
  return spentMicroUsd >= usdToMicroUsd(cap);
}

/**
 * Submits the due time's run as the schedule's maker, keyed by the schedule and the due time: a
 * second submit of the same due time answers the first run. The run's input carries the schedule
 * and the due time; its limits are the schedule's.
 */
async function submitFire(
  deps: ScheduleFireDeps,
  schedule: ScheduleRecord,
  dueMs: number,
  key: string,
): Promise<RunView> {
  const { store } = deps;
  const { run } = schedule.spec;
  const session = await store.getSession(schedule.tenant, run.session_id);
  if (!session) throw new ApiError('not_found', `session ${run.session_id} not found`);
  const agent = await store.getAgentVersion(schedule.tenant, session.agent_id, session.agent_version);
  if (!agent) throw new ApiError('not_found', `agent version ${session.agent_version} not found`);
  const idempotencyKey = fireIdempotencyKey(schedule, key);
  const submitted = await store
    .submitRun({
      tenant: schedule.tenant,
      principal: schedule.principal,
      sessionId: session.id,
      session,
      input: {
        text: run.input,
        ...(run.script !== undefined ? { script: run.script } : {}),
        ...(run.files?.length ? { files: run.files } : {}),
        schedule: { id: schedule.id, due_at_ms: dueMs },
      },
      // Held by the run too: it may outlive the schedule.
      ...(run.files?.length ? { files: run.files } : {}),
      limits: scheduleRunLimits(deps.config.limits, session, agent, run.limits),
      timeoutMs: run.timeout_ms,
      idempotencyKey,
      request: { schedule_id: schedule.id, due: key },
    })
    .catch(async (error: unknown) => {
      // The schedule's run changed after this due time was first submitted: its run stands.
      if (!(error instanceof ApiError) || error.code !== 'idempotency_conflict') throw error;
      return undefined;
    });
  if (!submitted) {
    const stored = await store.getRun(
      idempotentRunId(schedule.tenant, session.id, idempotencyKey),
      schedule.tenant,
    );
    if (!stored) throw new Error(`schedule ${schedule.id}: the run of ${key} is neither new nor stored`);
    return stored;
  }
  // Enqueued after the record exists; a repeated submit re-adds the same job id: one job.
  if (submitted.run.status === 'queued') await deps.lifecycle.followUp(submitted.run);
  await deps.schedules.noteRun(schedule.id, submitted.run.id, dueMs);
  return submitted.run;
}

/** A due time's submit is keyed by the schedule and the due time: every repeat names one run. */
function fireIdempotencyKey(schedule: ScheduleRecord, key: string): string {
  return `schedule.${schedule.id}.${key}`;
}

function fireRunId(schedule: ScheduleRecord, key: string): string {
  return idempotentRunId(schedule.tenant, schedule.spec.run.session_id, fireIdempotencyKey(schedule, key));
}
