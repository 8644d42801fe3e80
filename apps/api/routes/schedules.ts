import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  createScheduleSchema,
  patchScheduleSchema,
  runViewSchema,
  type ScheduleSpec,
  type ScheduleView,
  scheduleSpecSchema,
  scheduleViewSchema,
} from '../../../libs/contracts/index.js';
import { scriptSchema } from '../../../libs/models/index.js';
import { scheduleLimitsProblem } from '../../../libs/schedules/limits.js';
import type { ScheduleRecord } from '../../../libs/store/index.js';
import { timingProblem, upcomingDueTimes } from '../../../queues/schedule-times.js';
import { removeScheduler, schedulerNextMs, upsertScheduler } from '../../../queues/schedules.js';
import { authenticate, identityOf } from '../auth.js';
import { answers, BODY_FAILURES, namedBody } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

export const scheduleListSchema = z.object({ schedules: z.array(scheduleViewSchema) });
export const scheduleRunsSchema = z.object({ runs: z.array(runViewSchema) });

/** Due times a schedule's view shows. */
const UPCOMING_SHOWN = 5;

namedBody(createScheduleSchema, 'CreateSchedule', {
  cron: '0 7 * * 1-5',
  timezone: 'Europe/Berlin',
  run: { session_id: 'ses_0a1b2c3d4e5f6g7h8j9k', input: 'Collect the morning briefing' },
  overlap: 'skip',
  daily_cost_cap_usd: '5',
});
namedBody(patchScheduleSchema, 'PatchSchedule', { cron: '0 8 * * 1-5' });

/**
 * Schedules: a run submitted on a cron or every so many milliseconds, by a BullMQ job scheduler
 * whose fires the run workers consume (libs/schedules). Another tenant's schedule is 404.
 */
export function registerScheduleRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  /** Refuses a spec the fires could not carry out: its timing, its limits, its session, its script. */
  async function checkSpec(tenant: string, spec: ScheduleSpec): Promise<void> {
    const problem =
      timingProblem(spec, deps.config.schedules.minIntervalMs, Date.now()) ??
      scheduleLimitsProblem(deps.config.limits, spec.run.limits);
    if (problem) throw new ApiError('validation_failed', problem);
    if (spec.run.script !== undefined && !scriptSchema.safeParse(spec.run.script).success)
      throw new ApiError('validation_failed', 'run.script: not a script (steps and an answer)');
    if (!(await store.getSession(tenant, spec.run.session_id)))
      throw new ApiError('not_found', `session ${spec.run.session_id} not found`);
    for (const fileId of spec.run.files ?? [])
      if (!(await store.uploads.get(tenant, fileId)))
        throw new ApiError('not_found', `file ${fileId} not found`);
  }

  /**
   * The schedule holds the files its runs list, as a run does: they outlast their 7 days while it
   * exists. A file it stops listing stays held until it is deleted.
   */
  async function holdFiles(tenant: string, schedule: ScheduleRecord): Promise<void> {
    const files = schedule.spec.run.files ?? [];
    if (files.length > 0) await store.uploads.hold(tenant, schedule.id, files);
  }

  async function view(schedule: ScheduleRecord): Promise<ScheduleView> {
    const { spec } = schedule;
    const nextMs = schedule.pausedReason
      ? undefined
      : await schedulerNextMs(deps.schedules.queue, schedule.id);
    return scheduleViewSchema.parse({
      id: schedule.id,
      cron: spec.cron ?? null,
      every_ms: spec.every_ms ?? null,
      timezone: spec.timezone,
      run: spec.run,
      overlap: spec.overlap,
      daily_cost_cap_usd: spec.daily_cost_cap_usd,
      paused: schedule.pausedReason !== null,
      paused_reason: schedule.pausedReason,
      next_due_at_ms: nextMs === undefined ? [] : upcomingDueTimes(spec, nextMs, UPCOMING_SHOWN),
      held_due_at_ms: schedule.heldDueMs,
      counts: schedule.counts,
      created_at_ms: schedule.createdAtMs,
    });
  }

  async function owned(tenant: string, id: string): Promise<ScheduleRecord> {
    const schedule = await deps.schedules.store.get(tenant, id);
    if (!schedule) throw new ApiError('not_found', `schedule ${id} not found`);
    return schedule;
  }

  app.post(
    '/v1/schedules',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'createSchedule',
        summary: 'Schedule a run',
        description:
          'Submits `run` at each due time of `cron` (in `timezone`) or every `every_ms`, at least SCHEDULE_MIN_INTERVAL_MS apart. Each run carries `input.schedule` {id, due_at_ms}; a due time is submitted once, whatever restarts or clock changes. `overlap: skip` skips a due time while the previous run goes on; `queue` holds one until it ends.',
        body: createScheduleSchema,
        response: answers({ 201: scheduleViewSchema }, 404, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const identity = identityOf(request);
      await checkSpec(identity.tenant, request.body);
      const schedule = await deps.schedules.store.create(
        { tenant: identity.tenant, principal: identity.principal, keyId: identity.key_id },
        request.body,
      );
      // A schedule whose files or scheduler could not be held or made would never fire as asked:
      // it is not kept.
      await holdFiles(identity.tenant, schedule)
        .then(() => upsertScheduler(deps.schedules.queue, schedule.id, schedule.spec))
        .catch(async (error: unknown) => {
          await deps.schedules.store.delete(identity.tenant, schedule.id);
          throw error;
        });
      return reply.code(201).send(await view(schedule));
    },
  );

  app.get(
    '/v1/schedules',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'listSchedules',
        summary: "The tenant's schedules",
        response: answers({ 200: scheduleListSchema }),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const schedules = await deps.schedules.store.list(tenant);
      return { schedules: await Promise.all(schedules.map(view)) };
    },
  );

  app.get(
    '/v1/schedules/:id',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'getSchedule',
        summary: 'A schedule, with its next due times and what its fires came to',
        params: idParams,
        response: answers({ 200: scheduleViewSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => view(await owned(identityOf(request).tenant, request.params.id)),
  );

  app.patch(
    '/v1/schedules/:id',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'updateSchedule',
        summary: 'Change a schedule',
        description:
          'Changes the fields given; `cron` and `every_ms` replace each other. A changed timing takes effect from the next due time.',
        params: idParams,
        body: patchScheduleSchema,
        response: answers({ 200: scheduleViewSchema }, 404, ...BODY_FAILURES),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const schedule = await owned(tenant, request.params.id);
      const patch = request.body;
      const { cron, every_ms, ...current } = schedule.spec;
      const timing =
        patch.cron !== undefined
          ? { cron: patch.cron }
          : patch.every_ms !== undefined
            ? { every_ms: patch.every_ms }
            : { cron, every_ms };
      const spec = scheduleSpecSchema.parse({
        ...current,
        ...Object.fromEntries(Object.entries(timing).filter(([, value]) => value !== undefined)),
        ...(patch.timezone !== undefined ? { timezone: patch.timezone } : {}),
        ...(patch.overlap !== undefined ? { overlap: patch.overlap } : {}),
        ...(patch.daily_cost_cap_usd !== undefined ? { daily_cost_cap_usd: patch.daily_cost_cap_usd } : {}),
        run: { ...current.run, ...patch.run },
      });
      await checkSpec(tenant, spec);
      await holdFiles(tenant, { ...schedule, spec });
      await deps.schedules.store.putSpec(schedule.id, spec);
      const timingChanged =
        spec.cron !== cron || spec.every_ms !== every_ms || spec.timezone !== current.timezone;
      if (timingChanged && !schedule.pausedReason)
        await upsertScheduler(deps.schedules.queue, schedule.id, spec);
      return view(await owned(tenant, schedule.id));
    },
  );

  app.delete(
    '/v1/schedules/:id',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'deleteSchedule',
        summary: 'Delete a schedule',
        description: 'No further due time fires; runs it submitted stay.',
        params: idParams,
        response: answers({ 204: z.undefined() }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request, reply) => {
      const { tenant } = identityOf(request);
      const schedule = await owned(tenant, request.params.id);
      await removeScheduler(deps.schedules.queue, schedule.id);
      await deps.schedules.store.delete(tenant, schedule.id);
      return reply.code(204).send();
    },
  );

  app.post(
    '/v1/schedules/:id/pause',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'pauseSchedule',
        summary: 'Pause a schedule',
        description: 'No due time fires while paused, and none is counted missed. Takes no body.',
        params: idParams,
        response: answers({ 200: scheduleViewSchema }, 400, 404, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const schedule = await owned(tenant, request.params.id);
      if (!schedule.pausedReason) {
        await deps.schedules.store.setPaused(schedule.id, 'requested');
        await removeScheduler(deps.schedules.queue, schedule.id);
      }
      return view(await owned(tenant, schedule.id));
    },
  );

  app.post(
    '/v1/schedules/:id/resume',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'resumeSchedule',
        summary: 'Resume a paused schedule',
        description:
          'Due times from now on fire again. A schedule paused because the key that made it was revoked cannot be resumed (409): make it again with a live key; one paused because its session is gone resumes once PATCH names another. Takes no body.',
        params: idParams,
        response: answers({ 200: scheduleViewSchema }, 400, 404, 409, 413, 422),
      },
      preHandler: authenticate(store, 'runs:write'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const schedule = await owned(tenant, request.params.id);
      if (schedule.pausedReason === 'key_revoked')
        throw new ApiError(
          'conflict',
          'the key that made this schedule was revoked; make it again with a live key',
        );
      if (
        schedule.pausedReason === 'session_gone' &&
        !(await store.getSession(tenant, schedule.spec.run.session_id))
      )
        throw new ApiError(
          'conflict',
          `session ${schedule.spec.run.session_id} is gone: PATCH run.session_id first`,
        );
      if (schedule.pausedReason === 'requested' || schedule.pausedReason === 'session_gone') {
        await deps.schedules.store.setPaused(schedule.id, null);
        await upsertScheduler(deps.schedules.queue, schedule.id, schedule.spec);
      }
      return view(await owned(tenant, schedule.id));
    },
  );

  app.get(
    '/v1/schedules/:id/runs',
    {
      schema: {
        tags: ['schedules'],
        operationId: 'listScheduleRuns',
        summary: 'The runs a schedule submitted, newest due time first (at most 200)',
        params: idParams,
        response: answers({ 200: scheduleRunsSchema }, 404, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const schedule = await owned(tenant, request.params.id);
      const runIds = await deps.schedules.store.runIds(schedule.id);
      const runs = await Promise.all(runIds.slice(0, 200).map((runId) => store.getRun(runId, tenant)));
      return { runs: runs.filter((run) => run !== undefined) };
    },
  );
}
