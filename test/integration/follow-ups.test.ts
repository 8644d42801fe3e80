import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { FOLLOW_UP_GRACE_MS, RunLifecycle } from '../../libs/runtime/index.js';
import { FollowUpIndex, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

/**
 * Consequences done at least once: a worker that dies between a child's end and its
 * parent's resume leaves the resume to the sweeper, found through the follow-up index written
 * before the child's execution began.
 */
describe('follow-ups owed by an execution', () => {
  const prefix = uniquePrefix('follow-ups');
  let redis: Redis;
  let store: RunStore;
  let sessionId: string;
  let nowMs = Date.now();
  const enqueued: RunView[] = [];
  let lifecycle: RunLifecycle;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-follow-ups');
    store = new RunStore(redis, `${prefix}:`, () => nowMs);
    lifecycle = new RunLifecycle({
      store,
      followUps: new FollowUpIndex(redis, `${prefix}:`),
      clock: () => nowMs,
      enqueue: async (run) => {
        enqueued.push(run);
      },
    });
    sessionId = await createTestSession(store, 'acme', { instructions: 'x' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  const submit = (parentRunId?: string) =>
    submitStoreRun(store, sessionId, parentRunId ? { parentRunId } : {});

  it('resumes a parent on a sweep when the worker that ended its child died before the resume', async () => {
    const parent = await submit();
    const parentClaim = ran(await store.claimRun(parent.id, 1, 'owner-p'));
    await lifecycle.owe(parentClaim);
    const child = await submit(parent.id);
    ran(await store.waitRun(parent.id, 'owner-p', 'waiting_child', {}, child.id));
    const childClaim = ran(await store.claimRun(child.id, 1, 'owner-c'));
    await lifecycle.owe(childClaim);
    // The child's end is written; its worker dies before any follow-up.
    ran(await store.finishRun(child.id, 'owner-c', { status: 'succeeded', result: 'ok' }));

    expect(await lifecycle.sweepFollowUps()).toBe(0);
    nowMs += FOLLOW_UP_GRACE_MS + 1;
    // The child's follow-up resumes the parent (the parent's own, for its wait, may come first or not).
    expect(await lifecycle.sweepFollowUps()).toBeGreaterThanOrEqual(1);
    expect(await store.getRun(parent.id)).toMatchObject({ status: 'queued', execution: 2 });
    expect(enqueued.map((run) => [run.id, run.execution])).toEqual([[parent.id, 2]]);
    // Carried out once: nothing is owed any more.
    nowMs += FOLLOW_UP_GRACE_MS + 1;
    expect(await lifecycle.sweepFollowUps()).toBe(0);
    expect(enqueued).toHaveLength(1);
  });

  it('keeps watching an execution still running instead of dropping it', async () => {
    enqueued.length = 0;
    const run = await submit();
    await lifecycle.owe(ran(await store.claimRun(run.id, 1, 'owner-r')));
    nowMs += FOLLOW_UP_GRACE_MS + 1;
    expect(await lifecycle.sweepFollowUps()).toBe(0);
    const cancelled = ran(await store.finishRun(run.id, 'owner-r', { status: 'cancelled' }));
    expect(cancelled.status).toBe('cancelled');
    nowMs += FOLLOW_UP_GRACE_MS + 1;
    expect(await lifecycle.sweepFollowUps()).toBe(1);
  });
});
