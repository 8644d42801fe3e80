import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { loadConfig } from '../../libs/config/index.js';
import type { RunLimits } from '../../libs/contracts/index.js';
import { executeRun } from '../../libs/run-worker/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, enqueueExecution } from '../../queues/index.js';
import { silentLogger } from '../fixtures/logger.js';
import { type ChatRequestBody, type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { figure, percentile, report } from './report.js';

const SUITE = 'loop';
/** Tool turns in the measured run (model call → `noop` tool call → its result), then one answer. */
const TURNS = 200;
/** A short run first, so scripts, caches and the HTTP connection are warm before the clock starts. */
const WARM_UP_TURNS = 10;
/** How often each request body of the measured run is replayed raw for the baseline. */
const REPLAYS = 3;
const TENANT = 'bench';
const MODEL_KEY_ENV = 'BENCH_LOOP_MODEL_API_KEY';

/** Room for every turn: the counts never stop the run, only its answer does. */
const LIMITS: RunLimits = {
  max_steps: TURNS + 50,
  max_model_calls: TURNS + 50,
  max_tool_calls: TURNS + 50,
  reserve_model_calls: 1,
  reserve_tool_calls: 1,
  max_cost_micro_usd: null,
  cost_reserve_micro_usd: 0,
};

/** One HTTP exchange with the model server as the client saw it: request sent → response body read. */
interface Exchange {
  startedAt: number;
  endedAt: number;
}

/**
 * The played model: a `noop` tool call on every turn, at once, its arguments differing each turn
 * (the loop breaker stops a run at the fifth identical call), until `turns` calls were made; then
 * an answer. The input text carries the run's number of turns.
 */
function noopPolicy(body: ChatRequestBody) {
  const made = body.messages.filter((message) => message.role === 'assistant').length;
  const input = String(body.messages.find((message) => message.role === 'user')?.content ?? '');
  const turns = Number(/turns=(\d+)/.exec(input)?.[1] ?? 0);
  if (made >= turns) return { content: 'done' };
  return { tool_calls: [{ name: 'noop', arguments: { n: made } }] };
}

/**
 * `globalThis.fetch`, timing every exchange with the model server from the call to its whole
 * response body read (the adapter's client takes the global fetch when it is built). Other URLs
 * pass through untouched.
 */
function timingFetch(realFetch: typeof fetch, model: ModelServer, exchanges: Exchange[]): typeof fetch {
  return async (input, init) => {
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
    if (!url.startsWith(model.baseUrl)) return realFetch(input, init);
    const startedAt = performance.now();
    const response = await realFetch(input, init);
    const body = await response.arrayBuffer();
    exchanges.push({ startedAt, endedAt: performance.now() });
    return new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
}

/** The baseline: the same request bodies, sent raw with fetch, each timed as the adapter's are. */
async function rawRoundTrips(realFetch: typeof fetch, model: ModelServer, bodies: readonly string[]) {
  const samples: number[] = [];
  for (let round = 0; round < REPLAYS; round += 1) {
    for (const body of bodies) {
      const startedAt = performance.now();
      const response = await realFetch(`${model.baseUrl}/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${model.apiKey}`, 'content-type': 'application/json' },
        body,
      });
      await response.arrayBuffer();
      samples.push(performance.now() - startedAt);
      if (!response.ok) throw new Error(`the raw request was answered ${response.status}`);
    }
  }
  return samples;
}

export default async function loopBench(): Promise<void> {
  const prefix = uniquePrefix('bench-loop');
  const model = await startModelServer({ policy: noopPolicy });
  const opsDir = mkdtempSync(join(tmpdir(), 'leasehold-bench-loop-'));
  copyFileSync(fileURLToPath(new URL('../../ops/limits.yaml', import.meta.url)), join(opsDir, 'limits.yaml'));
  writeFileSync(
    join(opsDir, 'models.yaml'),
    `default_model: bench
models:
  bench:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: ${MODEL_KEY_ENV}
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 1000000
    max_output_tokens: 256
`,
  );
  const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
  const store = new RunStore(redis, `${prefix}:`);
  const queue = createRunsQueue(redis, prefix);
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    LEASEHOLD_OPS_DIR: opsDir,
    [MODEL_KEY_ENV]: model.apiKey,
    LOG_LEVEL: 'silent',
  });
  const deps = {
    config,
    store,
    transcripts: new RunTranscripts(redis, `${prefix}:`),
    registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
    profiles: new RedisLeaseStore(redis, `${prefix}:`),
    lifecycle: new RunLifecycle({ store, enqueue: (run) => enqueueExecution(queue, run) }),
    logger: silentLogger(),
  };
  const realFetch = globalThis.fetch;
  const exchanges: Exchange[] = [];
  globalThis.fetch = timingFetch(realFetch, model, exchanges);

  /** One whole run through the run worker's own execution: a session with no browser profile. */
  async function run(turns: number): Promise<void> {
    const agent = await store.putAgent(TENANT, { model: 'bench', instructions: '', tools: [] });
    if (agent.status === 'not_found') throw new Error('agent not stored');
    const session = await store.createSession({
      tenant: TENANT,
      principal: 'alice',
      agentId: agent.agent.id,
    });
    if (!session) throw new Error('session not stored');
    const { run: submitted } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId: session.id,
      input: { text: `turns=${turns}` },
      limits: LIMITS,
      timeoutMs: 600_000,
    });
    const ownerToken = `owner-${randomBytes(4).toString('hex')}`;
    const claimed = await store.claimRun(submitted.id, submitted.execution, ownerToken);
    if (!claimed.ok) throw new Error(`run not claimed: ${claimed.message}`);
    const end = await executeRun(deps, claimed.run, ownerToken, new AbortController().signal);
    if (end.kind !== 'succeeded') throw new Error(`the bench run ended ${JSON.stringify(end)}`);
    const done = await store.getRun(submitted.id);
    if (done?.usage.model_calls !== turns + 1 || done.usage.tool_calls !== turns)
      throw new Error(`the bench run counted ${JSON.stringify(done?.usage)}`);
  }

  try {
    await run(WARM_UP_TURNS);
    exchanges.length = 0;
    const firstRequest = model.requests.length;
    await run(TURNS);
    const measured = model.requests.slice(firstRequest);
    if (exchanges.length !== TURNS + 1 || measured.length !== TURNS + 1)
      throw new Error(`expected ${TURNS + 1} model calls, saw ${exchanges.length}`);

    // The platform's own time in a turn: from the model's answer read to the next request sent —
    // the adapter decoding it, usage, ledger, breaker and transcript writes, the tool, the checks
    // before the next call and that call's request built.
    const platform: number[] = [];
    for (let index = 1; index < exchanges.length; index += 1) {
      const previous = exchanges[index - 1] as Exchange;
      platform.push((exchanges[index] as Exchange).startedAt - previous.endedAt);
    }
    const inRun = exchanges.map((exchange) => exchange.endedAt - exchange.startedAt);
    const raw = await rawRoundTrips(
      realFetch,
      model,
      measured.map((request) => JSON.stringify(request.body)),
    );

    const commands = await redisRoundTripP50(redis);
    process.stderr.write(
      `loop: ${TURNS} turns; platform p50 ${percentile(platform, 50).toFixed(3)} ms, p99 ${percentile(platform, 99).toFixed(3)} ms; ` +
        `model HTTP in the run p50 ${percentile(inRun, 50).toFixed(3)} ms; raw p50 ${percentile(raw, 50).toFixed(3)} ms; ` +
        `Redis PING p50 ${commands.toFixed(3)} ms\n`,
    );
    report(
      figure(SUITE, 'loop_overhead_p50_ms', percentile(platform, 50), {
        metric: 'raw_chat_roundtrip_p50_ms',
        value: percentile(raw, 50),
      }),
    );
  } finally {
    globalThis.fetch = realFetch;
    await queue.close();
    await model.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
    rmSync(opsDir, { recursive: true, force: true });
  }
}

/** One Redis round trip, for scale: the platform's turn is mostly a handful of these. */
async function redisRoundTripP50(redis: Redis): Promise<number> {
  const samples: number[] = [];
  for (let index = 0; index < 200; index += 1) {
    const startedAt = performance.now();
    await redis.ping();
    samples.push(performance.now() - startedAt);
  }
  return percentile(samples, 50);
}
