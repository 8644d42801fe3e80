import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { type ExecutionDeps, RunLost } from '../../libs/run-worker/index.js';
import { StoreRunPort } from '../../libs/run-worker/store-run-port.js';
import type { StepWrite } from '../../libs/runtime/loop-ports.js';
import { RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

const started: StepWrite = {
  kind: 'model',
  turn: 1,
  index: null,
  status: 'started',
  started_at_ms: 1_000,
  ended_at_ms: null,
  duration_ms: null,
  model: null,
  tool: null,
};

/** The run worker's port names each step and treats a refused step as the transcript's refusal. */
describe("the run worker's step writes", () => {
  const prefix = `${uniquePrefix('run-steps-port')}:`;
  let redis: Redis;
  let store: RunStore;
  let deps: ExecutionDeps;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-steps-port');
    store = new RunStore(redis, prefix);
    deps = { store, transcripts: new RunTranscripts(redis, prefix) } as unknown as ExecutionDeps;
    sessionId = await createTestSession(store, 'acme', { instructions: 'go' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  async function claimed(owner: string): Promise<RunView> {
    return ran(await store.claimRun((await submitStoreRun(store, sessionId)).id, 1, owner));
  }

  it('names a step by attempt, turn and index and writes it for the owner', async () => {
    const run = await claimed('w1');
    const port = new StoreRunPort(deps, run, 'w1');
    await port.recordStep(started);
    await port.recordStep({ ...started, kind: 'tool', turn: 2, index: 1 });
    expect((await store.listSteps(run.id, 0, 10)).steps.map((step) => step.id)).toEqual(['a1-m1', 'a1-t2-1']);
  });

  it('loses the run when a step is refused to a worker that is no longer its owner', async () => {
    const run = await claimed('w1');
    ran(await store.releaseRun(run.id, 'w1'));
    ran(await store.claimRun(run.id, 1, 'w2'));
    await expect(new StoreRunPort(deps, run, 'w1').recordStep(started)).rejects.toBeInstanceOf(RunLost);
    expect((await store.listSteps(run.id, 0, 10)).steps).toEqual([]);
  });

  it('drops a parked mark whose approval was decided first, the run going on', async () => {
    const run = await claimed('w1');
    const invocationId = `${run.id}-a1-s1-i0`;
    await store.recordInvocation(run.id, 'w1', { step: 1, index: 0, tool: 'browser.act', state: 'started' });
    const { approvalId } = await store.requestApproval(run.id, 'w1', {
      invocationId,
      tool: 'browser.act',
      arguments: {},
    });
    await store.approve('acme', approvalId, 'alice');
    const mark: StepWrite = {
      ...started,
      kind: 'tool',
      index: 0,
      status: 'waiting_approval',
      tool: {
        name: 'browser.act',
        invocation_id: invocationId,
        arguments: {},
        outcome: null,
        settle: null,
        postcondition: null,
        page: null,
        screenshot: null,
        screenshot_status: null,
        approval_id: approvalId,
        person: null,
        target: null,
        page_log: null,
        downloads: [],
      },
    };
    await expect(new StoreRunPort(deps, run, 'w1').recordStep(mark)).resolves.toBeUndefined();
    expect((await store.listSteps(run.id, 0, 10)).steps).toEqual([]);
  });
});
