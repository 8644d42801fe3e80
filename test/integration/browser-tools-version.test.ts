import { rmSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import type { RunView } from '../../libs/contracts/index.js';
import { BrowserWorkerRegistry, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { claimAndExecute, submitTestRun } from '../fixtures/execute-run.js';
import { type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { writeOpsDir } from '../fixtures/ops-dir.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';

/**
 * Through the run worker's own composition (`executeRun`, a real model server, real
 * Redis): the browser tools a bound run's model is offered say their contract version, and the
 * run records that version, shown by `GET /v1/runs/{id}`; a run without browser tools records none.
 */
describe('the browser tools version a run records', () => {
  const prefix = uniquePrefix('tools-version');
  let redis: Redis;
  let store: RunStore;
  let model: ModelServer;
  let queue: RunsQueue;
  let api: ApiHandle;
  let apiKey: string;
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
    api = await startTestApi(prefix, { LEASEHOLD_OPS_DIR: opsDir, TUTOR_API_KEY: model.apiKey });
    apiKey = (await store.createApiKey({ tenant: 't1', principal: 'alice', scopes: ['runs:read'] })).key;
  });

  afterAll(async () => {
    await api?.close();
    await queue?.obliterate({ force: true });
    await queue?.close();
    await model?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
    await deletePrefixedKeys(redis, `${prefix}:`);
    await redis?.quit();
  });

  async function executed(run: RunView): Promise<void> {
    const { end } = await claimAndExecute(
      {
        store,
        transcripts: new RunTranscripts(redis, `${prefix}:`),
        registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
        profiles: { allowedOrigins: async () => ['https://shop.example'] },
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
  }

  async function shown(runId: string): Promise<Record<string, unknown>> {
    const response = await fetch(`${api.url}/v1/runs/${runId}`, {
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(response.status).toBe(200);
    return (await response.json()) as Record<string, unknown>;
  }

  it('offers a bound run’s model tools that say contract 1.6.0, and records 1.6.0 on the run', async () => {
    const run = await submitTestRun(store, {
      agent: { model: 'tutor', instructions: 'browse' },
      browserProfileId: 'shop',
      input: { text: 'look around' },
    });
    expect(run.browser_tools_version).toBeNull();
    const before = model.requests.length;
    await executed(run);

    const tools = model.requests[before]?.body.tools ?? [];
    const browserTools = tools.filter((tool) => tool.function.name.startsWith('browser'));
    expect(browserTools).toHaveLength(4);
    for (const tool of browserTools)
      expect(tool.function.description).toContain('(browser tools contract 1.6.0)');
    expect((await store.getRun(run.id))?.browser_tools_version).toBe('1.6.0');
    expect(await shown(run.id)).toMatchObject({
      id: run.id,
      status: 'succeeded',
      browser_tools_version: '1.6.0',
    });
  });

  it('records no version for a run whose execution offers no browser tools', async () => {
    const run = await submitTestRun(store, {
      agent: { model: 'tutor', instructions: 'answer' },
      input: { text: 'say done' },
    });
    const before = model.requests.length;
    await executed(run);

    expect(model.requests[before]?.body.tools ?? []).toEqual([]);
    expect((await store.getRun(run.id))?.browser_tools_version).toBeNull();
    expect(await shown(run.id)).toMatchObject({
      id: run.id,
      status: 'succeeded',
      browser_tools_version: null,
    });
  });

  it('takes the version from the running run’s owner only', async () => {
    const run = await submitTestRun(store, {
      agent: { model: 'tutor', instructions: 'answer' },
      input: { text: 'x' },
    });
    expect(await store.noteBrowserTools(run.id, 'nobody', '1.3.0')).toMatchObject({
      ok: false,
      code: 'wrong_status',
    });
    expect((await store.claimRun(run.id, run.execution, 'owner-1')).ok).toBe(true);
    expect(await store.noteBrowserTools(run.id, 'owner-2', '1.3.0')).toMatchObject({
      ok: false,
      code: 'not_owner',
    });
    expect((await store.getRun(run.id))?.browser_tools_version).toBeNull();
    const noted = await store.noteBrowserTools(run.id, 'owner-1', '1.3.0');
    expect(noted.ok && noted.run.browser_tools_version).toBe('1.3.0');
  });
});
