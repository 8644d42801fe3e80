import type { Job } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/index.js';
import { type ScheduleFireOutcome, scheduleSpecSchema } from '../../libs/contracts/index.js';
import { scheduleJobProcessor } from '../../libs/schedules/fire.js';
import { RunStore, ScheduleStore } from '../../libs/store/index.js';
import {
  createSchedulesQueue,
  FIRE_JOB,
  type ScheduleJob,
  type SchedulesQueue,
} from '../../queues/schedules.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession } from '../fixtures/run-store.js';

/**
 * The fire rules on a real Redis, driven as the run worker's schedules worker drives them: a job
 * per due time, handed to the processor. A due time handed over again — a restarted worker, a
 * stalled job, a clock set back, the hour a daylight-saving change repeats — makes no second run.
 */
describe('schedule fires: each due time decided and submitted once', () => {
  const prefix = uniquePrefix('schedule-fires');
  let redis: Redis;
  let store: RunStore;
  let schedules: ScheduleStore;
  let queue: SchedulesQueue;
  let sessionId: string;
  let makerKeyId: string;
  const counted: Array<[ScheduleFireOutcome, number]> = [];
  const enqueued: string[] = [];
  let process: (job: Job<ScheduleJob, string, string>) => Promise<string>;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl());
    store = new RunStore(redis, `${prefix}:`);
    schedules = new ScheduleStore(redis, `${prefix}:`);
    queue = createSchedulesQueue(redis, prefix);
    sessionId = await createTestSession(store, 'acme', { instructions: 'Answer.' });
    makerKeyId = (await store.createApiKey({ tenant: 'acme', principal: 'alice', scopes: ['runs:write'] }))
      .identity.key_id;
    const processor = scheduleJobProcessor({
      config: loadConfig({}),
      schedules,
      store,
      lifecycle: { followUp: async (run) => void enqueued.push(run.id) },
      queue,
      counted: (outcome, by) => void counted.push([outcome, by]),
      logger: silentLogger(),
    });
    process = (job) => processor(job);
  });

  afterAll(async () => {
    await queue.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  });

  const fireJob = (scheduleId: string, dueMs: number) =>
    ({
      name: FIRE_JOB,
      id: `repeat:${scheduleId}:${dueMs}`,
      data: { scheduleId },
      opts: { prevMillis: dueMs },
    }) as Job<ScheduleJob, string, string>;

  async function makeSchedule(timing: Record<string, unknown>) {
    return schedules.create(
      { tenant: 'acme', principal: 'alice', keyId: makerKeyId },
      scheduleSpecSchema.parse({
        ...timing,
        run: { session_id: sessionId, input: 'Brief me', limits: { max_steps: 5 } },
      }),
    );
  }

  it('submits a due time once however often its job is processed', async () => {
    const schedule = await makeSchedule({ every_ms: 60_000 });
    const dueMs = Math.floor(Date.now() / 60_000) * 60_000;
    expect(await process(fireJob(schedule.id, dueMs))).toBe('fired');
    expect(await process(fireJob(schedule.id, dueMs))).toBe('decided_before');
    const runIds = await schedules.runIds(schedule.id);
    expect(runIds).toHaveLength(1);
    const run = await store.getRun(runIds[0] as string, 'acme');
    expect(run?.input).toMatchObject({ text: 'Brief me', schedule: { id: schedule.id, due_at_ms: dueMs } });
    expect(run?.limits.max_steps).toBe(5);
    expect((await schedules.get('acme', schedule.id))?.counts.fired).toBe(1);
  });

  it('answers the first run when the decision was lost after the submit (a crash in between)', async () => {
    const schedule = await makeSchedule({ every_ms: 60_000 });
    const dueMs = Math.floor(Date.now() / 60_000) * 60_000;
    expect(await process(fireJob(schedule.id, dueMs))).toBe('fired');
    // The decision forgotten, as if the worker died between the submit and the decision.
    await redis.del(`${prefix}:{sch:${schedule.id}}:fires`);
    expect(await process(fireJob(schedule.id, dueMs))).toBe('fired');
    expect(await schedules.runIds(schedule.id)).toHaveLength(1);
  });

  it('fires the repeated daylight-saving 01:30 once', async () => {
    const schedule = await makeSchedule({ cron: '30 * * * *', timezone: 'America/New_York' });
    const firstOneThirty = Date.UTC(2026, 10, 1, 5, 30); // 01:30 EDT
    const secondOneThirty = Date.UTC(2026, 10, 1, 6, 30); // 01:30 EST, an hour later
    expect(await process(fireJob(schedule.id, firstOneThirty))).toBe('fired');
    expect(await process(fireJob(schedule.id, secondOneThirty))).toBe('decided_before');
    expect(await schedules.runIds(schedule.id)).toHaveLength(1);
  });

  it('counts the due times a late fire stands in for as missed, once', async () => {
    const schedule = await makeSchedule({ every_ms: 60_000 });
    const dueMs = Math.floor(Date.now() / 60_000) * 60_000 - 5 * 60_000;
    counted.length = 0;
    expect(await process(fireJob(schedule.id, dueMs))).toBe('fired');
    expect(await process(fireJob(schedule.id, dueMs))).toBe('decided_before');
    const missed = (await schedules.get('acme', schedule.id))?.counts.missed ?? 0;
    expect(missed).toBeGreaterThanOrEqual(4);
    expect(counted).toEqual([
      ['fired', 1],
      ['missed', missed],
    ]);
  });

  it('skips fires past the daily cost cap, counting the day’s runs by their due times', async () => {
    const schedule = await makeSchedule({ every_ms: 60_000, daily_cost_cap_usd: '0.5' });
    const dayMs = 24 * 3_600_000;
    const morning = Math.floor(Date.now() / dayMs) * dayMs + 60_000;
    expect(await process(fireJob(schedule.id, morning))).toBe('fired');
    const [first] = await schedules.runIds(schedule.id);
    // The first run spends USD 0.60 and ends: the cap of USD 0.50 is spent for that day.
    expect((await store.claimRun(first as string, 1, 'owner-1')).ok).toBe(true);
    expect((await store.addUsage(first as string, 'owner-1', { cost_micro_usd: 600_000 })).ok).toBe(true);
    expect(
      (await store.finishRun(first as string, 'owner-1', { status: 'succeeded', result: { answer: 'ok' } }))
        .ok,
    ).toBe(true);
    expect(await process(fireJob(schedule.id, morning + 60_000))).toBe('capped');
    // The next day's first due time fires again.
    expect(await process(fireJob(schedule.id, morning + dayMs))).toBe('fired');
    expect(await schedules.runIds(schedule.id)).toHaveLength(2);
    expect((await schedules.get('acme', schedule.id))?.counts).toMatchObject({ fired: 2, capped: 1 });
  });

  it('pauses a schedule whose session is gone, its scheduler removed', async () => {
    const schedule = await schedules.create(
      { tenant: 'acme', principal: 'alice', keyId: makerKeyId },
      scheduleSpecSchema.parse({ every_ms: 60_000, run: { session_id: 'ses_gone0000', input: 'x' } }),
    );
    expect(await process(fireJob(schedule.id, Date.now()))).toBe('paused');
    expect((await schedules.get('acme', schedule.id))?.pausedReason).toBe('session_gone');
    expect(await schedules.runIds(schedule.id)).toEqual([]);
  });
});
