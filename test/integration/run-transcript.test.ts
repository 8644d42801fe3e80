import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RunKeys, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/** A browser tool's answer as the run loop writes it: the whole observation, the heavy entry. */
function observed(buttons: number) {
  return {
    kind: 'tool',
    callId: 'call_2',
    name: 'browser.act',
    outcome: {
      ok: true,
      result: {
        observation: {
          url: 'http://127.0.0.1:4000/',
          title: 'Bench page',
          text: 'Bench page\nEight buttons.\nOneTwoThree\nClicked One',
          text_truncated: false,
          revision: 'atYxcPOZwmvw',
          settle: { result: 'dom_quiet', elapsed_ms: 316 },
          elements: Array.from({ length: buttons }, (_, index) => ({
            ref: `e${index + 1}`,
            role: 'button',
            name: `Button ${index + 1}`,
            state: {},
          })),
          window: { offset: 0, count: buttons, visible_seen: buttons, candidates_checked: buttons },
        },
      },
    },
  };
}

describe("a run's transcript in Redis (redis_bytes_per_run)", () => {
  const prefix = `${uniquePrefix('run-transcript')}:`;
  let redis: Redis;
  let store: RunStore;
  let transcripts: RunTranscripts;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-transcript');
    store = new RunStore(redis, prefix);
    transcripts = new RunTranscripts(redis, prefix);
    sessionId = await createTestSession(store, 'acme', { instructions: 'go' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  it('stores a large entry compressed and a small one as plain JSON, and reads both back as written', async () => {
    const { run } = await store.submitRun({
      tenant: 'acme',
      principal: 'alice',
      sessionId,
      input: 'click',
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    ran(await store.claimRun(run.id, 1, 'w'));
    const model = { kind: 'model', toolCalls: [{ id: 'call_2', name: 'browser.act', args: {} }] };
    const heavy = observed(9);
    await transcripts.append(run.id, 'w', model, heavy);
    const loaded = await transcripts.load<unknown>(run.id);
    expect(loaded.slice(-2)).toEqual([model, heavy]);

    const stored = await redis.lrangeBuffer(new RunKeys(prefix).transcript(run.id), -2, -1);
    expect(stored[0]?.toString()).toBe(JSON.stringify(model));
    // Less than a third of its JSON: the observation's names repeat from entry to entry.
    expect(stored[1]?.length).toBeLessThan(JSON.stringify(heavy).length / 3);
    expect(stored[1]?.[0]).not.toBe('{'.charCodeAt(0));
  });
});
