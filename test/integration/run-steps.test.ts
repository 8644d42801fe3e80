import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { modelStepId, type RunView, toolStepId } from '../../libs/contracts/index.js';
import { RunStore, type StepRecord } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

const TENANT = 'acme';

function modelStep(run: RunView, turn: number, status: StepRecord['status'], atMs: number): StepRecord {
  return {
    id: modelStepId(run.attempt, turn),
    run_id: run.id,
    attempt: run.attempt,
    turn,
    index: null,
    kind: 'model',
    status,
    started_at_ms: atMs,
    ended_at_ms: status === 'ended' ? atMs + 5 : null,
    duration_ms: status === 'ended' ? 5 : null,
    model:
      status === 'ended'
        ? {
            input_tokens: 10,
            cached_input_tokens: 0,
            output_tokens: 2,
            cost_micro_usd: 7,
            tool_calls: [],
            answered: true,
          }
        : null,
    tool: null,
  };
}

function toolStep(
  run: RunView,
  turn: number,
  index: number,
  status: StepRecord['status'],
  atMs: number,
  approvalId: string | null = null,
): StepRecord {
  return {
    id: toolStepId(run.attempt, turn, index),
    run_id: run.id,
    attempt: run.attempt,
    turn,
    index,
    kind: 'tool',
    status,
    started_at_ms: atMs,
    ended_at_ms: status === 'ended' ? atMs + 9 : null,
    duration_ms: status === 'ended' ? 9 : null,
    model: null,
    tool: {
      name: 'browser.act',
      invocation_id: `${run.id}-a${run.attempt}-s${turn}-i${index}`,
      arguments: { action: 'fill', text: '[secret]', list: [] },
      outcome: status === 'ended' ? { ok: true, code: null, message: null } : null,
      settle: null,
      postcondition: null,
      page: status === 'ended' ? { url: 'https://shop.test/', title: 'Shop' } : null,
      screenshot: status === 'ended' ? 'a1-t1-0.jpg' : null,
      // A name no browser worker noted was written before its call answered: it reads `stored`.
      screenshot_status: status === 'ended' ? { state: 'stored', reason: null } : null,
      approval_id: approvalId,
      person: null,
      target: null,
      page_log: null,
      downloads: [],
    },
  };
}

describe('the run store: step records', () => {
  const prefix = `${uniquePrefix('run-steps')}:`;
  let redis: Redis;
  let store: RunStore;
  let nowMs = 1_800_000_000_000;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-steps');
    store = new RunStore(redis, prefix, () => nowMs);
    sessionId = await createTestSession(store, TENANT, { instructions: 'go' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  async function runningRun(owner: string): Promise<RunView> {
    const run = await submitStoreRun(store, sessionId);
    return ran(await store.claimRun(run.id, 1, owner));
  }

  it('orders steps as they first started and keeps the first seq and start when a step is written again', async () => {
    const run = await runningRun('w');
    expect(await store.recordStep('w', modelStep(run, 1, 'started', 1_000))).toEqual({
      ok: true,
      written: true,
      seq: 1,
    });
    expect((await store.recordStep('w', toolStep(run, 1, 0, 'started', 2_000))).ok).toBe(true);
    expect(await store.recordStep('w', modelStep(run, 1, 'ended', 1_500))).toEqual({
      ok: true,
      written: true,
      seq: 1,
    });
    expect((await store.recordStep('w', toolStep(run, 1, 0, 'ended', 2_100))).ok).toBe(true);

    const { steps, nextCursor } = await store.listSteps(run.id, 0, 10);
    expect(nextCursor).toBeNull();
    expect(steps.map((step) => [step.id, step.seq, step.status, step.started_at_ms])).toEqual([
      ['a1-m1', 1, 'ended', 1_000],
      ['a1-t1-0', 2, 'ended', 2_000],
    ]);
    // Written as JSON and never re-encoded: an empty list stays a list.
    expect(steps[1]?.tool).toMatchObject({
      arguments: { action: 'fill', text: '[secret]', list: [] },
      page: { url: 'https://shop.test/', title: 'Shop' },
      screenshot: 'a1-t1-0.jpg',
    });
    expect(steps[0]?.model).toMatchObject({ input_tokens: 10, tool_calls: [], answered: true });
  });

  it('appends each step event in the same script, with the step named and small', async () => {
    const run = await runningRun('w');
    await store.recordStep('w', modelStep(run, 1, 'started', 1_000));
    await store.recordStep('w', modelStep(run, 1, 'ended', 1_000), {
      eventOutcome: { ok: false, code: 'model_error', message: 'x' },
    });
    await store.recordStep('w', toolStep(run, 1, 0, 'started', 2_000));
    await store.recordStep('w', toolStep(run, 1, 0, 'ended', 2_000));
    const events = (await store.readEvents(run.id)).filter((event) => event.type.startsWith('step.'));
    // The step's id, its tool as it starts, a failure's code and the
    // screenshot as it ends, nothing more; the rest is the step's own record.
    expect(events.map((event) => [event.type, event.data])).toEqual([
      ['step.started', { step_id: 'a1-m1' }],
      ['step.ended', { step_id: 'a1-m1', code: 'model_error' }],
      ['step.started', { step_id: 'a1-t1-0', tool: 'browser.act' }],
      ['step.ended', { step_id: 'a1-t1-0', screenshot: 'a1-t1-0.jpg' }],
    ]);
  });

  it("stores a step's record packed, smaller than its JSON, and reads it back whole (redis_bytes_per_run)", async () => {
    const run = await runningRun('w');
    const base = toolStep(run, 1, 0, 'ended', 2_000);
    const step: StepRecord = {
      ...base,
      tool: {
        ...(base.tool as NonNullable<StepRecord['tool']>),
        arguments: { revision: 'r1', element: 'e2', action: 'click', list: [] },
        settle: { result: 'dom_quiet', elapsed_ms: 348 },
        postcondition: { result: 'satisfied', scope: 'observation_window', observations: 1, elapsed_ms: 5 },
      },
    };
    await store.recordStep('w', step);
    const stored = await redis.hgetBuffer(`${prefix}{run:${run.id}}:steps`, step.id);
    expect(stored?.length).toBeLessThan(JSON.stringify(step).length / 2);
    const [read] = (await store.listSteps(run.id, 0, 10)).steps;
    expect(read).toEqual({ ...step, seq: 1 });
    // Written again, the ended step stays as it was: the script still reads its seq and status.
    expect(await store.recordStep('w', { ...step, started_at_ms: 9_000 })).toEqual({
      ok: true,
      written: false,
      seq: 1,
    });
  });

  it('keeps an ended step as it is: a replay writes nothing and tells nothing', async () => {
    const run = await runningRun('w');
    await store.recordStep('w', toolStep(run, 1, 0, 'ended', 2_000));
    const before = (await store.readEvents(run.id)).length;
    expect(await store.recordStep('w', toolStep(run, 1, 0, 'started', 3_000))).toEqual({
      ok: true,
      written: false,
      seq: 1,
    });
    expect((await store.listSteps(run.id, 0, 10)).steps[0]).toMatchObject({
      status: 'ended',
      started_at_ms: 2_000,
    });
    expect(await store.readEvents(run.id)).toHaveLength(before);
    // A `started` sent before the ledger answers writes only a step not yet recorded.
    await store.recordStep('w', toolStep(run, 1, 1, 'started', 4_000));
    expect(
      (await store.recordStep('w', toolStep(run, 1, 1, 'started', 5_000), { onlyIfAbsent: true })).ok &&
        (await store.listSteps(run.id, 1, 10)).steps[0]?.started_at_ms,
    ).toBe(4_000);
  });

  it('refuses a worker that lost the run, writing no step and no event', async () => {
    const run = await runningRun('w1');
    const events = (await store.readEvents(run.id)).length;
    expect(await store.recordStep('w2', modelStep(run, 1, 'started', 1_000))).toMatchObject({
      ok: false,
      code: 'not_owner',
    });
    ran(await store.finishRun(run.id, 'w1', { status: 'succeeded', result: 'done' }));
    expect(await store.recordStep('w1', modelStep(run, 1, 'started', 1_000))).toMatchObject({
      ok: false,
      code: 'wrong_status',
    });
    expect((await store.listSteps(run.id, 0, 10)).steps).toEqual([]);
    expect(await redis.exists(`${prefix}{run:${run.id}}:step-order`)).toBe(0);
    expect((await store.readEvents(run.id)).length).toBe(events + 1);
  });

  it('marks a parked call waiting on its approval only while that approval is pending', async () => {
    const run = await runningRun('w');
    const invocationId = `${run.id}-a1-s1-i0`;
    await store.recordStep('w', toolStep(run, 1, 0, 'started', 1_000));
    await store.recordInvocation(run.id, 'w', { step: 1, index: 0, tool: 'browser.act', state: 'started' });
    const { approvalId } = await store.requestApproval(run.id, 'w', {
      invocationId,
      tool: 'browser.act',
      arguments: {},
    });
    const parkedMark = toolStep(run, 1, 0, 'waiting_approval', 1_200, approvalId);
    // Another approval id, or another call's, is no fence.
    expect(
      await store.recordStep('', toolStep(run, 1, 0, 'waiting_approval', 1_200, 'apr_00000000000000000000')),
    ).toMatchObject({ ok: false, code: 'wrong_status' });
    expect(await store.recordStep('', parkedMark)).toMatchObject({ ok: true, written: true, seq: 1 });
    expect((await store.listSteps(run.id, 0, 10)).steps[0]).toMatchObject({
      status: 'waiting_approval',
      started_at_ms: 1_000,
      tool: { approval_id: approvalId },
    });
    await store.approve(TENANT, approvalId, 'alice');
    expect(await store.recordStep('', parkedMark)).toMatchObject({ ok: false, code: 'wrong_status' });
  });

  it('stores a step without what its id and its run already say, and reads it back whole', async () => {
    const run = await runningRun('w');
    const step = toolStep(run, 1, 0, 'ended', 2_000);
    await store.recordStep('w', step);
    const stored = (await redis.hget(`${prefix}{run:${run.id}}:steps`, 'a1-t1-0')) ?? '';
    expect(stored).not.toContain(run.id);
    expect(stored).not.toContain('"settle"');
    expect(stored.length).toBeLessThan(JSON.stringify(step).length - 100);
    expect((await store.listSteps(run.id, 0, 10)).steps[0]).toEqual({ ...step, seq: 1 });
  });

  it('pages through many steps with a cursor, at most 100 a page', async () => {
    const run = await runningRun('w');
    for (let turn = 1; turn <= 130; turn += 1)
      await store.recordStep('w', modelStep(run, turn, 'started', turn));
    const first = await store.listSteps(run.id, 0, 100);
    expect(first.steps.map((step) => step.seq)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(first.nextCursor).toBe('100');
    const second = await store.listSteps(run.id, Number(first.nextCursor), 100);
    expect(second.steps.map((step) => step.turn)).toEqual(Array.from({ length: 30 }, (_, i) => i + 101));
    expect(second.nextCursor).toBeNull();
    await expect(store.listSteps(run.id, 0, 101)).rejects.toThrow(RangeError);
    nowMs += 1;
  });
});
