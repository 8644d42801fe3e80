import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { executeRun } from '../../apps/run-worker/execution.js';
import { loadConfig } from '../../libs/config/index.js';
import type { TranscriptEntry } from '../../libs/runtime/index.js';
import { type BrowserWorkerRecord, BrowserWorkerRegistry, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { createRunsQueue, type RunsQueue } from '../../queues/index.js';
import { TEST_TOKEN } from '../fixtures/browser-worker.js';
import { ACT_PATH, LeaseRig, NAVIGATE_PATH, OBSERVE_PATH } from '../fixtures/lease-rig.js';
import { silentLogger } from '../fixtures/logger.js';
import { testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/** The registry as the run worker reads it, except that the browser worker answers behind the proxy. */
class ProxiedRegistry extends BrowserWorkerRegistry {
  constructor(
    redis: Redis,
    prefix: string,
    private readonly proxyUrl: () => string,
  ) {
    super(redis, prefix);
  }

  override async findForProfile(): Promise<BrowserWorkerRecord> {
    return { id: 'bw-test', url: this.proxyUrl(), pinnedProfiles: '*', heartbeatAtMs: Date.now() };
  }
}

/** Every value stored under `prefix`, whatever its type, as one text. */
async function everythingStored(redis: Redis, prefix: string): Promise<{ keys: string[]; text: string }> {
  const keys = await redis.keys(`${prefix}*`);
  const values: unknown[] = [];
  for (const key of keys) {
    const type = await redis.type(key);
    if (type === 'string') values.push(await redis.get(key));
    else if (type === 'hash') values.push(await redis.hgetall(key));
    else if (type === 'list') values.push(await redis.lrange(key, 0, -1));
    else if (type === 'set') values.push(await redis.smembers(key));
    else if (type === 'zset') values.push(await redis.zrange(key, 0, -1, 'WITHSCORES'));
    else if (type === 'stream') values.push(await redis.xrange(key, '-', '+'));
  }
  return { keys, text: JSON.stringify(values) };
}

/**
 * ADR-0130 d7: "A tool may attach an evidence key to a successful result. The platform computes it,
 * and the model never sees it. It is never part of a stored result." Driven through the run
 * worker's composition against a real lease service; the keys the service answered are read off the
 * wire (the proxy), then looked for in everything Redis holds.
 */
describe('the evidence key stays with the platform', () => {
  const prefix = uniquePrefix('chaos-evidence');
  let rig: LeaseRig;
  let store: RunStore;
  let transcripts: RunTranscripts;
  let queue: RunsQueue;

  beforeAll(async () => {
    rig = await LeaseRig.start({
      prefix,
      principal: 'alice',
      profileIds: 'lesson',
      faultProxy: true,
      page: '<!doctype html><title>lesson</title><p>Pick the word</p><button onclick="this.textContent = \'Checked\'">Check</button>',
      redisOptions: { maxRetriesPerRequest: null },
    });
    store = new RunStore(rig.redis, rig.keyPrefix);
    transcripts = new RunTranscripts(rig.redis, rig.keyPrefix);
    queue = createRunsQueue(rig.redis, prefix);
  });

  afterAll(async () => {
    await queue?.obliterate({ force: true });
    await queue?.close();
    await rig?.close();
  });

  it('never appears in a stored ledger entry, transcript, run event or any other record', async () => {
    const profileId = await rig.newProfile({ id: 'lesson-evidence' });
    const agent = await store.putAgent('t1', { model: 'scripted', instructions: 'learn' });
    if (agent.status === 'not_found') throw new Error('agent not stored');
    const session = await store.createSession({
      tenant: 't1',
      principal: 'alice',
      agentId: agent.agent.id,
      browserProfileId: profileId,
    });
    if (!session) throw new Error('session not stored');
    const { run: submitted } = await store.submitRun({
      tenant: 't1',
      principal: 'alice',
      sessionId: session.id,
      input: {
        text: 'do the exercise',
        script: {
          steps: [
            { tool: 'browser.navigate', url: `${rig.origin}/lesson` },
            { tool: 'browser.observe' },
            { tool: 'browser.observe' },
          ],
          answer: 'done',
        },
      },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    const ownerToken = `owner-${randomBytes(4).toString('hex')}`;
    const claimed = await store.claimRun(submitted.id, submitted.execution, ownerToken);
    if (!claimed.ok) throw new Error(`run not claimed: ${claimed.message}`);
    const config = loadConfig({
      REDIS_URL: testRedisUrl(),
      LEASEHOLD_KEY_PREFIX: `${prefix}:`,
      QUEUE_PREFIX: prefix,
      LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN,
      LOG_LEVEL: 'silent',
    });

    const end = await executeRun(
      {
        config,
        store,
        transcripts,
        registry: new ProxiedRegistry(rig.redis, rig.keyPrefix, () => rig.proxy.url),
        profiles: rig.leases,
        queue,
        logger: silentLogger(),
      },
      claimed.run,
      ownerToken,
      new AbortController().signal,
    );
    expect(end).toEqual({ kind: 'succeeded', answer: 'done' });

    // The keys the service attached to its three answers, as they crossed the wire.
    const answered = [NAVIGATE_PATH, OBSERVE_PATH, ACT_PATH]
      .flatMap((path) => rig.seenFor(path, profileId))
      .map((request) => JSON.parse(request.upstreamBody?.toString() ?? '{}') as { evidence_key?: unknown });
    const evidenceKeys = answered.flatMap((answer) =>
      typeof answer.evidence_key === 'string' ? [answer.evidence_key] : [],
    );
    expect(evidenceKeys).toHaveLength(3);

    // What is stored is not empty: three results with their observations, and the events.
    const ledger = await store.listInvocations(submitted.id);
    expect(ledger.map((entry) => entry.state)).toEqual(['completed', 'completed', 'completed']);
    const tools = (await transcripts.load<TranscriptEntry>(submitted.id)).filter(
      (entry) => entry.kind === 'tool',
    );
    expect(tools).toHaveLength(3);
    expect(JSON.stringify(tools)).toContain('Pick the word');
    expect((await store.readEvents(submitted.id)).length).toBeGreaterThan(0);

    const stored = await everythingStored(rig.redis, rig.keyPrefix);
    for (const key of evidenceKeys) {
      expect(JSON.stringify(ledger)).not.toContain(key);
      expect(JSON.stringify(tools)).not.toContain(key);
      expect(JSON.stringify(await store.readEvents(submitted.id))).not.toContain(key);
      expect(stored.text).not.toContain(key);
    }
  });
});
