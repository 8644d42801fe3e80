import { rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BrowserWorkerRegistry, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { claimAndExecute, submitTestRun } from '../fixtures/execute-run.js';
import { type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { writeOpsDir } from '../fixtures/ops-dir.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * ADR-0130 d9 through the run worker's own composition (`executeRun`): a bound run's model request
 * carries `browser_origins=` with at most 16 of the profile's origins, however many it allows.
 */
describe('the browser_origins row of a bound run', () => {
  const prefix = uniquePrefix('origins-row');
  const origins = Array.from({ length: 20 }, (_, index) => `https://site${index + 1}.example`);
  let redis: Redis;
  let store: RunStore;
  let model: ModelServer;
  let queue: RunsQueue;
  let opsDir: string;

  beforeAll(async () => {
    redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    store = new RunStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
    model = await startModelServer({ policy: () => ({ content: 'done' }) });
    opsDir = writeOpsDir(`default_model: tutor
models:
  tutor:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: TUTOR_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 100000
`);
  });

  afterAll(async () => {
    await queue?.obliterate({ force: true });
    await queue?.close();
    await model?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    await deletePrefixedKeys(redis, `${prefix}:`);
    await redis?.quit();
  });

  it('names the first 16 of a profile’s 20 allowed origins, and no more', async () => {
    const run = await submitTestRun(store, {
      agent: { model: 'tutor', instructions: 'browse' },
      browserProfileId: 'wide',
      input: { text: 'look around' },
    });
    const { end } = await claimAndExecute(
      {
        store,
        transcripts: new RunTranscripts(redis, `${prefix}:`),
        registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
        profiles: { allowedOrigins: async () => origins },
        queue,
      },
      run,
      {
        prefix,
        env: {
          LEASEHOLD_DATA_PLANE_TOKEN: 'd'.repeat(32),
          LEASEHOLD_OPS_DIR: opsDir,
          TUTOR_API_KEY: model.apiKey,
        },
      },
    );

    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });
    const messages = model.requests[0]?.body.messages ?? [];
    const row = messages.at(-1);
    expect(row).toEqual({ role: 'system', content: `browser_origins=${origins.slice(0, 16).join(',')}` });
    expect(JSON.stringify(messages)).not.toContain('site17.example');
  });
});
