import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrowserWorkerRegistry, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { claimAndExecute, submitTestRun } from '../fixtures/execute-run.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const USD = 1_000_000;

/**
 * ADR-0130 d1: "A delegated child's cost limit is carved from what the parent has left" — through
 * the run worker's own `agent.delegate` (executeRun → delegateToChild → the stored child run), with
 * the parent's spend as the store holds it when it delegates, not as it was when it was claimed.
 */
describe('a delegated child run’s limits', () => {
  const prefix = uniquePrefix('child-limits');
  let redis: Redis;
  let store: RunStore;
  let queue: RunsQueue;

  beforeAll(() => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    store = new RunStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
  });

  afterAll(async () => {
    await queue?.obliterate({ force: true });
    await queue?.close();
    await deletePrefixedKeys(redis, `${prefix}:`);
    await redis?.quit();
  });

  it('are carved from the parent’s remaining cost budget at the moment it delegates', async () => {
    const run = await submitTestRun(store, {
      agent: { model: 'scripted', instructions: 'split the work', tools: ['agent.delegate'] },
      input: {
        text: 'do it in two parts',
        script: {
          steps: [{ tool: 'agent.delegate', input: 'part two', script: { steps: [], answer: 'two done' } }],
          answer: 'both done',
        },
      },
      limits: { ...TEST_RUN_LIMITS, max_cost_micro_usd: 30 * USD, cost_reserve_micro_usd: 3 * USD },
    });
    const { end, config } = await claimAndExecute(
      {
        store,
        transcripts: new RunTranscripts(redis, `${prefix}:`),
        registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
        profiles: { allowedOrigins: async () => [] },
        queue,
      },
      run,
      {
        prefix,
        // Spent after the claim: the claimed view still says USD 0.
        afterClaim: async (ownerToken) => {
          const spent = await store.addUsage(run.id, ownerToken, { cost_micro_usd: 12 * USD });
          if (!spent.ok) throw new Error('usage not added');
        },
      },
    );

    expect(end).toMatchObject({ kind: 'waiting_child' });
    const childRunId = end.kind === 'waiting_child' ? end.childRunId : '';
    const child = await store.getRun(childRunId);
    expect(child?.parent_run_id).toBe(run.id);
    // USD 30 − USD 12 spent = USD 18; the counts are the child's own (run_defaults).
    expect(child?.limits).toMatchObject({
      max_cost_micro_usd: 18 * USD,
      max_cost_usd: '18',
      max_model_calls: config.limits.run_defaults.max_model_calls,
    });
    expect(child?.limits.cost_reserve_micro_usd).toBeLessThanOrEqual(18 * USD);
  });
});
