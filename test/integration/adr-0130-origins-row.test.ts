import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeRun } from '../../apps/run-worker/execution.js';
import { loadConfig } from '../../libs/config/index.js';
import { BrowserWorkerRegistry, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { TEST_RUN_LIMITS } from '../fixtures/run-store.js';

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
    opsDir = mkdtempSync(join(tmpdir(), 'leasehold-ops-'));
    copyFileSync(
      fileURLToPath(new URL('../../ops/limits.yaml', import.meta.url)),
      join(opsDir, 'limits.yaml'),
    );
    writeFileSync(
      join(opsDir, 'models.yaml'),
      `default_model: tutor
models:
  tutor:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: TUTOR_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 100000
`,
    );
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
    const agent = await store.putAgent('t1', { model: 'tutor', instructions: 'browse' });
    if (agent.status === 'not_found') throw new Error('agent not stored');
    const session = await store.createSession({
      tenant: 't1',
      principal: 'alice',
      agentId: agent.agent.id,
      browserProfileId: 'wide',
    });
    if (!session) throw new Error('session not stored');
    const { run } = await store.submitRun({
      tenant: 't1',
      principal: 'alice',
      sessionId: session.id,
      input: { text: 'look around' },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    const ownerToken = `owner-${randomBytes(4).toString('hex')}`;
    const claimed = await store.claimRun(run.id, run.execution, ownerToken);
    if (!claimed.ok) throw new Error(`run not claimed: ${claimed.message}`);
    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: 'd'.repeat(32),
      LEASEHOLD_OPS_DIR: opsDir,
      TUTOR_API_KEY: model.apiKey,
      LOG_LEVEL: 'silent',
    });

    const end = await executeRun(
      {
        config,
        store,
        transcripts: new RunTranscripts(redis, `${prefix}:`),
        registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
        profiles: { allowedOrigins: async () => origins },
        queue,
        logger: silentLogger(),
      },
      claimed.run,
      ownerToken,
      new AbortController().signal,
    );

    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });
    const messages = model.requests[0]?.body.messages ?? [];
    const row = messages.at(-1);
    expect(row).toEqual({ role: 'system', content: `browser_origins=${origins.slice(0, 16).join(',')}` });
    expect(JSON.stringify(messages)).not.toContain('site17.example');
  });
});
