import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { type ParentResumeDeps, resumeParentOf } from '../../libs/runtime/index.js';
import { RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

describe("a child's end resumes its waiting parent, once", () => {
  const prefix = `${uniquePrefix('delegation-resume')}:`;
  let redis: Redis;
  let store: RunStore;
  let sessionId: string;
  const enqueued: string[] = [];
  let deps: ParentResumeDeps;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-delegation-resume');
    store = new RunStore(redis, prefix);
    sessionId = await createTestSession(store, 'acme', { instructions: 'delegate' });
    deps = {
      store,
      enqueue: async (run) => {
        enqueued.push(`${run.id}-x${run.execution}`);
      },
    };
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  async function submit(parentRunId?: string): Promise<RunView> {
    return (
      await store.submitRun({
        tenant: 'acme',
        principal: 'alice',
        sessionId,
        input: 'x',
        limits: TEST_RUN_LIMITS,
        timeoutMs: 60_000,
        ...(parentRunId ? { parentRunId } : {}),
      })
    ).run;
  }

  async function endedChildOfWaitingParent(): Promise<{ parent: RunView; child: RunView }> {
    const parent = await submit();
    ran(await store.claimRun(parent.id, 1, 'parent-owner'));
    const child = await submit(parent.id);
    const waiting = ran(
      await store.waitRun(parent.id, 'parent-owner', 'waiting_child', { child_run_id: child.id }, child.id),
    );
    expect(waiting).toMatchObject({ status: 'waiting_child', waiting_on_run_id: child.id });
    ran(await store.claimRun(child.id, 1, 'child-owner'));
    const ended = ran(await store.finishRun(child.id, 'child-owner', { status: 'succeeded', result: 'ok' }));
    return { parent, child: ended };
  }

  it('requeues the parent as its next execution and clears what it waited on', async () => {
    const { parent, child } = await endedChildOfWaitingParent();
    expect(await resumeParentOf(deps, child)).toBe('resumed');
    expect(await store.getRun(parent.id)).toMatchObject({
      status: 'queued',
      execution: 2,
      waiting_on_run_id: null,
    });
    expect(enqueued).toContain(`${parent.id}-x2`);
  });

  it('resumes the parent once when both the child side and the parent side try', async () => {
    const { parent, child } = await endedChildOfWaitingParent();
    const answers = await Promise.all([resumeParentOf(deps, child), resumeParentOf(deps, child)]);
    expect(answers.sort()).toEqual(['not_waiting', 'resumed']);
    expect((await store.getRun(parent.id))?.execution).toBe(2);
  });

  it('leaves a parent waiting on another child, and a child that has not ended', async () => {
    const { parent, child } = await endedChildOfWaitingParent();
    const stranger = { ...child, id: (await submit(parent.id)).id };
    expect(await resumeParentOf(deps, stranger)).toBe('not_waiting');
    expect(await resumeParentOf(deps, { ...child, status: 'running' })).toBe('not_waiting');
    expect((await store.getRun(parent.id))?.status).toBe('waiting_child');
  });
});
