import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, type RunView } from '../../libs/contracts/index.js';
import { RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const TENANT = 'acme';

describe('the run store: runs and their status changes', () => {
  const prefix = `${uniquePrefix('run-store-runs')}:`;
  let redis: Redis;
  let store: RunStore;
  let nowMs = 1_800_000_000_000;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-store-runs');
    store = new RunStore(redis, prefix, () => nowMs);
    sessionId = await createTestSession(store, TENANT, { instructions: 'answer' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  async function submit(idempotencyKey?: string, input: unknown = { message: 'hi' }): Promise<RunView> {
    const outcome = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input,
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
      idempotencyKey,
    });
    return outcome.run;
  }

  async function eventTypes(runId: string): Promise<string[]> {
    return (await store.readEvents(runId)).map((event) => event.type);
  }

  it('stores a submitted run queued with its input, pinned limits, attempt 1, execution 1 and deadline', async () => {
    const run = await submit(undefined, { message: 'find the invoice' });
    expect(run).toMatchObject({
      status: 'queued',
      tenant: TENANT,
      principal: 'alice',
      session_id: sessionId,
      input: { message: 'find the invoice' },
      limits: TEST_RUN_LIMITS,
      attempt: 1,
      execution: 1,
      deadline_at_ms: nowMs + 60_000,
      usage: { steps: 0, model_calls: 0, tool_calls: 0, cost_micro_usd: 0 },
      result: null,
      error: null,
      cancel_requested: false,
    });
    expect(await store.getRun(run.id, TENANT)).toEqual(run);
    expect(await eventTypes(run.id)).toEqual(['run.submitted']);
  });

  it('refuses a run for a session the tenant does not have', async () => {
    await expect(
      store.submitRun({
        tenant: 'other',
        principal: 'bob',
        sessionId,
        input: {},
        limits: TEST_RUN_LIMITS,
        timeoutMs: 1_000,
      }),
    ).rejects.toMatchObject({ code: 'not_found' });
  });

  it('answers a duplicate submission with the same Idempotency-Key with the first run and creates nothing', async () => {
    const first = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: { message: 'once' },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
      idempotencyKey: 'key-dup',
    });
    const second = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: { message: 'once' },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
      idempotencyKey: 'key-dup',
    });
    expect(first.status).toBe('created');
    expect(second.status).toBe('existing');
    expect(second.run).toEqual(first.run);
    expect(await eventTypes(first.run.id)).toEqual(['run.submitted']);
  });

  it('makes exactly one run when 20 submissions with the same Idempotency-Key race', async () => {
    const before = (await store.listRuns(TENANT, sessionId)).length;
    const outcomes = await Promise.all(
      Array.from({ length: 20 }, () =>
        store.submitRun({
          tenant: TENANT,
          principal: 'alice',
          sessionId,
          input: { message: 'race' },
          limits: TEST_RUN_LIMITS,
          timeoutMs: 60_000,
          idempotencyKey: 'key-race',
        }),
      ),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'created')).toHaveLength(1);
    expect(new Set(outcomes.map((outcome) => outcome.run.id)).size).toBe(1);
    expect((await store.listRuns(TENANT, sessionId)).length).toBe(before + 1);
    const runId = outcomes[0]?.run.id ?? '';
    expect(await eventTypes(runId)).toEqual(['run.submitted']);
  });

  it('refuses an Idempotency-Key reused with another input, storing nothing', async () => {
    await submit('key-conflict', { message: 'one' });
    const error = await submit('key-conflict', { message: 'two' }).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ApiError);
    expect((error as ApiError).code).toBe('idempotency_conflict');
  });

  it('keeps runs of another tenant out of sight', async () => {
    const run = await submit();
    expect(await store.getRun(run.id, 'other')).toBeUndefined();
    expect(await store.listRuns('other', sessionId)).toEqual([]);
    const cancel = await store.cancelRun('other', run.id);
    expect(cancel).toMatchObject({ ok: false, code: 'not_found' });
    expect((await store.getRun(run.id))?.status).toBe('queued');
  });

  it("lists a session's runs in submission order", async () => {
    const a = await submit();
    nowMs += 1;
    const b = await submit();
    const ids = (await store.listRuns(TENANT, sessionId)).map((run) => run.id);
    expect(ids.indexOf(a.id)).toBeLessThan(ids.indexOf(b.id));
  });

  it('claims a queued run for one worker, and answers a second claim of the same execution with a refusal', async () => {
    const run = await submit();
    const claimed = await store.claimRun(run.id, 1, 'worker-a');
    expect(claimed).toMatchObject({ ok: true, detail: 'claimed', run: { status: 'running', execution: 1 } });
    expect(await store.claimRun(run.id, 1, 'worker-a')).toMatchObject({ ok: true, detail: 'already' });
    const stale = await store.claimRun(run.id, 1, 'worker-b');
    expect(stale).toMatchObject({ ok: false, code: 'not_owner', status: 'running' });
    expect(await eventTypes(run.id)).toEqual(['run.submitted', 'run.claimed']);
  });

  it('ignores a stale job of another execution', async () => {
    const run = await submit();
    expect(await store.claimRun(run.id, 2, 'worker-a')).toMatchObject({ ok: false, code: 'stale_execution' });
    expect((await store.getRun(run.id))?.status).toBe('queued');
  });

  it('lets a worker take over a stalled job of the current execution, locking out the dead owner', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'dead-worker'));
    const taken = await store.claimRun(run.id, 1, 'worker-b', { takeOver: true });
    expect(taken).toMatchObject({ ok: true, detail: 'taken_over', run: { status: 'running', attempt: 1 } });
    const zombie = await store.finishRun(run.id, 'dead-worker', { status: 'succeeded', result: 'late' });
    expect(zombie).toMatchObject({ ok: false, code: 'not_owner' });
    expect(zombie.ok ? '' : zombie.message).toMatch(/another owner/);
    expect(ran(await store.finishRun(run.id, 'worker-b', { status: 'succeeded', result: 'ok' })).status).toBe(
      'succeeded',
    );
    expect(await eventTypes(run.id)).toEqual([
      'run.submitted',
      'run.claimed',
      'run.resumed',
      'run.succeeded',
    ]);
  });

  it('refuses to claim a run that is not queued', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.parkRun(run.id, 'w'));
    expect(await store.claimRun(run.id, 1, 'w')).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'parked',
    });
  });

  it('parks a running run for its owner only, clearing the owner', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'owner'));
    expect(await store.parkRun(run.id, 'stale-token')).toMatchObject({ ok: false, code: 'not_owner' });
    expect((await store.getRun(run.id))?.status).toBe('running');
    const parked = ran(await store.parkRun(run.id, 'owner', { approval: 'x' }));
    expect(parked.status).toBe('parked');
    // The owner is cleared: even the former owner can no longer write.
    expect(await store.addUsage(run.id, 'owner', { steps: 1 })).toMatchObject({
      ok: false,
      code: 'wrong_status',
    });
    expect(await store.parkRun(run.id, 'owner')).toMatchObject({ ok: false, code: 'wrong_status' });
    const events = await store.readEvents(run.id);
    expect(events.at(-1)).toMatchObject({
      type: 'run.parked',
      data: { status: 'parked', previous: 'running', approval: 'x', execution: 1 },
    });
  });

  it('re-queues a parked or waiting run as a new execution with the same attempt', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w1'));
    ran(await store.parkRun(run.id, 'w1'));
    const requeued = ran(await store.requeueRun(run.id));
    expect(requeued).toMatchObject({ status: 'queued', execution: 2, attempt: 1 });
    expect(await store.claimRun(run.id, 1, 'w2')).toMatchObject({ ok: false, code: 'stale_execution' });
    ran(await store.claimRun(run.id, 2, 'w2'));
    ran(await store.waitRun(run.id, 'w2', 'waiting_child', { child_run_id: 'run_child' }));
    expect(await store.requeueRun(run.id, { expected: 'parked' })).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'waiting_child',
    });
    expect(ran(await store.requeueRun(run.id, { expected: 'waiting_child' })).execution).toBe(3);
    expect(await eventTypes(run.id)).toEqual([
      'run.submitted',
      'run.claimed',
      'run.parked',
      'run.requeued',
      'run.claimed',
      'run.waiting',
      'run.requeued',
    ]);
  });

  it('refuses to re-queue a queued, running or ended run', async () => {
    const run = await submit();
    expect(await store.requeueRun(run.id)).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'queued',
    });
    ran(await store.claimRun(run.id, 1, 'w'));
    expect(await store.requeueRun(run.id)).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'running',
    });
    ran(await store.finishRun(run.id, 'w', { status: 'succeeded', result: 1 }));
    expect(await store.requeueRun(run.id)).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'succeeded',
    });
  });

  it('finishes a running run with its result or a stable failure reason, by its owner only', async () => {
    const good = await submit();
    ran(await store.claimRun(good.id, 1, 'w'));
    expect(await store.finishRun(good.id, 'intruder', { status: 'succeeded', result: 'x' })).toMatchObject({
      ok: false,
      code: 'not_owner',
    });
    nowMs += 5;
    const done = ran(await store.finishRun(good.id, 'w', { status: 'succeeded', result: { answer: 42 } }));
    expect(done).toMatchObject({
      status: 'succeeded',
      result: { answer: 42 },
      error: null,
      ended_at_ms: nowMs,
    });
    expect(
      await store.finishRun(good.id, 'w', { status: 'failed', code: 'model_error', message: 'late' }),
    ).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'succeeded',
    });

    const bad = await submit();
    ran(await store.claimRun(bad.id, 1, 'w'));
    const failed = ran(
      await store.finishRun(bad.id, 'w', {
        status: 'failed',
        code: 'budget_exceeded',
        message: 'over budget',
        step: 3,
      }),
    );
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: 'budget_exceeded', message: 'over budget', step: 3 },
    });
    const last = (await store.readEvents(bad.id)).at(-1);
    expect(last).toMatchObject({
      type: 'run.failed',
      data: { error: { code: 'budget_exceeded', message: 'over budget', step: 3 }, previous: 'running' },
    });
  });

  it('cancels a queued, parked or waiting run at once', async () => {
    const queued = await submit();
    expect(await store.cancelRun(TENANT, queued.id)).toMatchObject({
      ok: true,
      detail: 'cancelled',
      run: { status: 'cancelled', error: { code: 'cancelled' } },
    });
    for (const wait of ['parked', 'waiting_user', 'waiting_child'] as const) {
      const run = await submit();
      ran(await store.claimRun(run.id, 1, 'w'));
      ran(wait === 'parked' ? await store.parkRun(run.id, 'w') : await store.waitRun(run.id, 'w', wait));
      expect(ran(await store.cancelRun(TENANT, run.id)).status).toBe('cancelled');
      expect((await eventTypes(run.id)).at(-1)).toBe('run.cancelled');
    }
    expect(await store.cancelRun(TENANT, queued.id)).toMatchObject({ ok: false, code: 'wrong_status' });
  });

  it('flags a running run for cancel, and a park of a flagged run ends it cancelled', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    const flagged = await store.cancelRun(TENANT, run.id);
    expect(flagged).toMatchObject({
      ok: true,
      detail: 'cancel_requested',
      run: { status: 'running', cancel_requested: true },
    });
    expect((await eventTypes(run.id)).at(-1)).toBe('run.cancel_requested');
    const parked = ran(await store.parkRun(run.id, 'w'));
    expect(parked.status).toBe('cancelled');
    expect((await eventTypes(run.id)).at(-1)).toBe('run.cancelled');
  });

  it('publishes the id of a running run whose cancel is requested, once', async () => {
    const subscriber = redis.duplicate();
    subscriber.on('error', () => {});
    try {
      const heard: string[] = [];
      subscriber.on('message', (channel: string, message: string) => {
        if (channel === store.cancelChannel) heard.push(message);
      });
      await subscriber.subscribe(store.cancelChannel);
      const run = await submit();
      ran(await store.claimRun(run.id, 1, 'w'));
      ran(await store.cancelRun(TENANT, run.id));
      ran(await store.cancelRun(TENANT, run.id));
      const queued = await submit();
      ran(await store.cancelRun(TENANT, queued.id));
      await expect.poll(() => heard).toEqual([run.id]);
      // Nothing but time can show an absence: every cancel above was answered, so a second message
      // would already be on its way over the local connection; 100 ms more bring none, neither for
      // the repeated cancel nor for the queued run.
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(heard).toEqual([run.id]);
    } finally {
      subscriber.disconnect();
    }
  });

  it('tells a cancel on its final event as the view tells it: error {code: cancelled, message, step: null}', async () => {
    const run = await submit();
    const ended = ran(await store.cancelRun(TENANT, run.id, 'no longer needed'));
    expect(ended.error).toEqual({ code: 'cancelled', message: 'no longer needed', step: null });
    expect((await store.readEvents(run.id)).at(-1)).toMatchObject({
      type: 'run.cancelled',
      data: { error: { code: 'cancelled', message: 'no longer needed', step: null } },
    });
  });

  it('lets the loop end a flagged running run cancelled', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.cancelRun(TENANT, run.id));
    const ended = ran(await store.finishRun(run.id, 'w', { status: 'cancelled' }));
    expect(ended).toMatchObject({ status: 'cancelled', error: { code: 'cancelled' } });
  });

  it('fails a run reclaimed by the sweeper from any status that is not an end, locking out its worker', async () => {
    const running = await submit();
    ran(await store.claimRun(running.id, 1, 'zombie'));
    const reclaimed = ran(await store.failRun(running.id, 'reclaimed', { expectedExecution: 1 }));
    expect(reclaimed).toMatchObject({ status: 'failed', error: { code: 'reclaimed' } });
    expect(await store.finishRun(running.id, 'zombie', { status: 'succeeded', result: 1 })).toMatchObject({
      ok: false,
      code: 'wrong_status',
    });
    expect(await store.addUsage(running.id, 'zombie', { steps: 1 })).toMatchObject({ ok: false });
    expect(await store.failRun(running.id, 'reclaimed')).toMatchObject({ ok: false, code: 'wrong_status' });

    const queued = await submit();
    expect(ran(await store.failRun(queued.id, 'deadline_exceeded')).error?.code).toBe('deadline_exceeded');
    const parked = await submit();
    ran(await store.claimRun(parked.id, 1, 'w'));
    ran(await store.parkRun(parked.id, 'w'));
    expect(ran(await store.failRun(parked.id, 'reclaimed')).status).toBe('failed');
  });

  it('fails a run with the step its caller names, on the view and on the final event, and no step when none is named', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    const failed = ran(
      await store.failRun(run.id, 'provider_unavailable', {
        message: 'the browser worker did not come back',
        step: 4,
      }),
    );
    expect(failed.error).toEqual({
      code: 'provider_unavailable',
      message: 'the browser worker did not come back',
      step: 4,
    });
    expect((await store.readEvents(run.id)).at(-1)).toMatchObject({
      type: 'run.failed',
      data: { error: { code: 'provider_unavailable', step: 4 } },
    });
    const swept = await submit();
    expect(ran(await store.failRun(swept.id, 'deadline_exceeded')).error).toEqual({
      code: 'deadline_exceeded',
      message: 'deadline_exceeded',
      step: null,
    });
    expect((await store.readEvents(swept.id)).at(-1)).toMatchObject({ data: { error: { step: null } } });
  });

  it('leaves a run alone when the sweeper names an execution it has moved past', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.parkRun(run.id, 'w'));
    ran(await store.requeueRun(run.id));
    expect(await store.failRun(run.id, 'reclaimed', { expectedExecution: 1 })).toMatchObject({
      ok: false,
      code: 'stale_execution',
    });
    expect((await store.getRun(run.id))?.status).toBe('queued');
  });

  it('retries a failed run as a new queued attempt with fresh usage and deadline', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.addUsage(run.id, 'w', { steps: 3, model_calls: 2, tool_calls: 1, cost_micro_usd: 1500 }));
    ran(await store.finishRun(run.id, 'w', { status: 'failed', code: 'model_error', message: 'boom' }));
    nowMs += 1_000;
    expect(await store.retryRun('other', run.id)).toMatchObject({ ok: false, code: 'not_found' });
    const retried = ran(await store.retryRun(TENANT, run.id));
    expect(retried).toMatchObject({
      status: 'queued',
      attempt: 2,
      execution: 2,
      error: null,
      ended_at_ms: null,
      deadline_at_ms: nowMs + 60_000,
      usage: { steps: 0, model_calls: 0, tool_calls: 0, cost_micro_usd: 0 },
    });
    expect((await eventTypes(run.id)).at(-1)).toBe('run.retried');
    expect(ran(await store.claimRun(run.id, 2, 'w2')).attempt).toBe(2);
  });

  it('refuses to retry a run that has not failed', async () => {
    const run = await submit();
    expect(await store.retryRun(TENANT, run.id)).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'queued',
    });
    ran(await store.claimRun(run.id, 1, 'w'));
    ran(await store.finishRun(run.id, 'w', { status: 'succeeded', result: null }));
    expect(await store.retryRun(TENANT, run.id)).toMatchObject({
      ok: false,
      code: 'wrong_status',
      status: 'succeeded',
    });
  });

  it('adds usage atomically for the owner only, with cost in micro-USD', async () => {
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w'));
    await Promise.all(
      Array.from({ length: 25 }, () =>
        store.addUsage(run.id, 'w', { steps: 1, model_calls: 1, tool_calls: 2, cost_micro_usd: 1_234 }),
      ),
    );
    expect(await store.addUsage(run.id, 'stale', { steps: 100 })).toMatchObject({
      ok: false,
      code: 'not_owner',
    });
    expect((await store.getRun(run.id))?.usage).toEqual({
      steps: 25,
      model_calls: 25,
      tool_calls: 50,
      cost_micro_usd: 30_850,
    });
    await expect(store.addUsage(run.id, 'w', { cost_micro_usd: 0.5 })).rejects.toThrow(RangeError);
  });

  it('answers not_found for a run that does not exist', async () => {
    expect(await store.claimRun('run_missing000', 1, 'w')).toMatchObject({ ok: false, code: 'not_found' });
    expect(await store.getRun('run_missing000')).toBeUndefined();
  });
});
