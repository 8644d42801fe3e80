import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiHandle, startApi } from '../../apps/api/server.js';
import { loadConfig } from '../../libs/config/index.js';
import type { RunView } from '../../libs/contracts/index.js';
import { DataPlaneClient } from '../../libs/provider/index.js';
import { type ExecutionDeps, executeRun } from '../../libs/run-worker/index.js';
import { RunLifecycle, releaseRunLease, runLeaseUpkeep } from '../../libs/runtime/index.js';
import {
  BrowserWorkerRegistry,
  LeaseUpkeepIndex,
  RedisLeaseStore,
  RunStore,
} from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { reclaimStalledRuns } from '../../libs/sweeper/index.js';
import { createMetrics } from '../../libs/telemetry/index.js';
import { createRunsQueue, enqueueExecution, type RunsQueue } from '../../queues/index.js';
import { startTestBrowserWorker, TEST_TOKEN, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { silentLogger } from '../fixtures/logger.js';
import { type PressSite, startPressSite } from '../fixtures/press-site.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/**
 * ADR-0127 Context, faults 4, 5, 6 and 7 where they live: at the end of a run execution
 * (`executeRun`), in the API's cancel and in the reclaim sweep. Each run executes through the run
 * worker's own `executeRun` over real Redis, a real lease service with real Chromium and a real
 * page; "another worker" is another set of execution dependencies over its own Redis connection.
 */

const MINUTE_MS = 60_000;
const press = { tool: 'browser.act', target: { role: 'button', name: 'Press me' }, action: 'click' };

describe('ADR-0127 faults at the end of an execution', () => {
  const prefix = uniquePrefix('adr0127-runs');
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    PORT: '0',
    LEASEHOLD_DATA_PLANE_TOKEN: TEST_TOKEN,
    LOG_LEVEL: 'silent',
  });
  const connections: Redis[] = [];
  const queues: RunsQueue[] = [];
  let site: PressSite;
  let worker: TestBrowserWorker;
  let api: ApiHandle;
  let admin: DataPlaneClient;
  let store: RunStore;
  let leases: RedisLeaseStore;
  let registry: BrowserWorkerRegistry;
  let agentId: string;

  function connection(): Redis {
    const redis = new Redis(testRedisUrl(), { maxRetriesPerRequest: null });
    connections.push(redis);
    return redis;
  }

  /** One run worker's execution dependencies, on a Redis connection of its own. */
  const RUN_WORKER_ID = 'rw-chaos';

  function runWorker(wrap: (store: RunStore) => RunStore = (own) => own): ExecutionDeps {
    const redis = connection();
    const queue = createRunsQueue(redis, prefix);
    queues.push(queue);
    const store = wrap(new RunStore(redis, `${prefix}:`));
    const profiles = new RedisLeaseStore(redis, `${prefix}:`);
    return {
      config,
      store,
      // Every execution here runs in one run worker: its leases go to that worker's upkeep index.
      upkeep: { workerId: RUN_WORKER_ID, index: new LeaseUpkeepIndex(redis, `${prefix}:`, profiles) },
      transcripts: new RunTranscripts(redis, `${prefix}:`),
      registry: new BrowserWorkerRegistry(redis, `${prefix}:`),
      profiles,
      lifecycle: new RunLifecycle({ store, enqueue: (run) => enqueueExecution(queue, run) }),
      logger: silentLogger(),
    };
  }

  beforeAll(async () => {
    site = await startPressSite();
    worker = await startTestBrowserWorker({ prefix });
    api = await startApi({
      config,
      logger: silentLogger(),
      metrics: createMetrics(),
      redisUrl: testRedisUrl(),
    });
    admin = new DataPlaneClient({ baseUrl: worker.url, token: TEST_TOKEN });
    const redis = connection();
    store = new RunStore(redis, `${prefix}:`);
    leases = new RedisLeaseStore(redis, `${prefix}:`);
    registry = new BrowserWorkerRegistry(redis, `${prefix}:`);
    const agent = await store.putAgent('t1', {
      model: 'scripted',
      instructions: 'shop',
      tools: ['agent.delegate'],
    });
    if (agent.status === 'not_found') throw new Error('agent not stored');
    agentId = agent.agent.id;
  });

  afterAll(async () => {
    await api?.close();
    await worker?.handle.close();
    await site?.close();
    for (const queue of queues) await queue.close();
    await queues[0]?.obliterate({ force: true }).catch(() => undefined);
    const [first] = connections;
    if (first) await deletePrefixedKeys(first, prefix);
    for (const redis of connections) redis.disconnect();
  });

  let profiles = 0;
  /** A run queued in a session bound to a profile of its own, following `steps` then answering. */
  async function submitRun(steps: unknown[], answer = 'Done.'): Promise<{ run: RunView; profileId: string }> {
    profiles += 1;
    const profileId = `runs-${profiles}`;
    await admin.createProfile({
      id: profileId,
      tenant: 't1',
      principal: 'alice',
      allowed_origins: [site.origin],
    });
    const session = await store.createSession({
      tenant: 't1',
      principal: 'alice',
      agentId,
      browserProfileId: profileId,
    });
    if (!session) throw new Error('session not stored');
    const { run } = await store.submitRun({
      tenant: 't1',
      principal: 'alice',
      sessionId: session.id,
      input: { text: 'shop', script: { steps, answer } },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 10 * MINUTE_MS,
    });
    return { run, profileId };
  }

  async function execute(deps: ExecutionDeps, runId: string, execution: number, owner: string) {
    const claimed = ran(await deps.store.claimRun(runId, execution, owner));
    return executeRun(deps, claimed, owner, new AbortController().signal);
  }

  async function liveLease(profileId: string) {
    const leaseId = await leases.liveLeaseId({ tenant: 't1', id: profileId });
    return leaseId ? leases.getLease({ tenant: 't1', id: profileId }, leaseId) : undefined;
  }

  /**
   * The run store as a run worker sees it, except that the owner answers each approval the moment
   * it is written — before the execution's end reads the run again — and `afterApproval` runs next.
   */
  function approvingAtOnce(afterApproval: (runId: string) => Promise<void> = async () => undefined) {
    return (own: RunStore): RunStore =>
      new Proxy(own, {
        get(target, property) {
          if (property === 'requestApproval')
            return async (...args: Parameters<RunStore['requestApproval']>) => {
              const requested = await target.requestApproval(...args);
              expect((await store.approve('t1', requested.approvalId, 'alice')).ok).toBe(true);
              await afterApproval(args[0]);
              return requested;
            };
          const value = Reflect.get(target, property, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
  }

  it('fault 7: an approval written before the end of the execution reads the run leaves it queued and keeps its lease; fault 6: the resumed execution in another worker clicks on the same page as action 2', async () => {
    const { run, profileId } = await submitRun([
      { tool: 'browser.navigate', url: `${site.origin}/f7` },
      press,
    ]);

    const parked = await execute(runWorker(approvingAtOnce()), run.id, 1, 'first-worker');
    expect(parked.kind).toBe('parked');
    // The approval came before the re-read: the run is queued to resume, so its page is kept.
    expect((await store.getRun(run.id))?.status).toBe('queued');
    const kept = await liveLease(profileId);
    expect(kept).toMatchObject({ state: 'live', sequence: 1, effects: 1, sealed: false });

    const resumed = await execute(runWorker(), run.id, 2, 'second-worker');
    expect(resumed).toEqual({ kind: 'succeeded', answer: 'Done.' });
    // The approved click met the run's own page, as action 2 of the same lease, then sealed.
    expect(await leases.getLease({ tenant: 't1', id: profileId }, kept?.id ?? '')).toMatchObject({
      state: 'closed',
      closeReason: 'closed',
      sealed: true,
      sequence: 2,
      effects: 2,
    });
    expect(site.hits.get('/f7')).toBe(1);
    const ledger = await store.listInvocations(run.id);
    expect(ledger.find((entry) => entry.tool === 'browser.act')).toMatchObject({
      state: 'completed',
      result: { ok: true },
    });
  });

  it('fault 7: a resumed execution already running in another worker before the first one ends keeps the lease for it', async () => {
    const { run, profileId } = await submitRun([
      { tool: 'browser.navigate', url: `${site.origin}/f7r` },
      press,
    ]);
    const other = runWorker();
    let claimedElsewhere: RunView | undefined;
    const first = runWorker(
      approvingAtOnce(async (runId) => {
        // Another worker claims the re-queued run before the first execution reads it again.
        claimedElsewhere = ran(await other.store.claimRun(runId, 2, 'other-worker'));
      }),
    );

    const parked = await execute(first, run.id, 1, 'first-worker');
    expect(parked.kind).toBe('parked');
    expect((await store.getRun(run.id))?.status).toBe('running');
    const kept = await liveLease(profileId);
    expect(kept).toMatchObject({ state: 'live', sequence: 1 });

    if (!claimedElsewhere) throw new Error('the other worker did not claim the run');
    const resumed = await executeRun(other, claimedElsewhere, 'other-worker', new AbortController().signal);
    expect(resumed.kind).toBe('succeeded');
    expect(await leases.getLease({ tenant: 't1', id: profileId }, kept?.id ?? '')).toMatchObject({
      state: 'closed',
      sealed: true,
      sequence: 2,
    });
  });

  it('fault 4: a parent waiting on its delegated child releases its page, so the child in another worker acquires the same profile', async () => {
    const child = {
      steps: [{ tool: 'browser.navigate', url: `${site.origin}/f4-child` }],
      answer: 'Child done.',
    };
    const { run: parent, profileId } = await submitRun(
      [
        { tool: 'browser.navigate', url: `${site.origin}/f4-parent` },
        { tool: 'agent.delegate', input: 'look at the child page', script: child },
      ],
      'Parent done.',
    );

    const waiting = await execute(runWorker(), parent.id, 1, 'parent-worker');
    expect(waiting.kind).toBe('waiting_child');
    const parentView = await store.getRun(parent.id);
    expect(parentView?.status).toBe('waiting_child');
    const childId = parentView?.waiting_on_run_id ?? '';
    // ADR-0127 d4: the parent's lease was sealed and closed before its child could start.
    expect(await leases.liveLeaseId({ tenant: 't1', id: profileId })).toBeUndefined();
    expect((await leases.getProfile({ tenant: 't1', id: profileId }))?.sealedAtMs).toEqual(
      expect.any(Number),
    );

    const childEnd = await execute(runWorker(), childId, 1, 'child-worker');
    expect(childEnd).toEqual({ kind: 'succeeded', answer: 'Child done.' });
    expect(site.hits.get('/f4-child')).toBe(1);
    const childLedger = await store.listInvocations(childId);
    expect(childLedger.find((entry) => entry.tool === 'browser.navigate')).toMatchObject({
      state: 'completed',
      result: { ok: true },
    });

    // The child's end resumed the parent as its next execution; it finishes with the child's answer.
    expect((await store.getRun(parent.id))?.status).toBe('queued');
    const parentEnd = await execute(runWorker(), parent.id, 2, 'parent-worker-2');
    expect(parentEnd).toEqual({ kind: 'succeeded', answer: 'Parent done.' });
  });

  it('fault 5: a run cancelled through the API while parked releases its lease in the same request', async () => {
    const { run, profileId } = await submitRun([
      { tool: 'browser.navigate', url: `${site.origin}/f5` },
      press,
    ]);
    expect((await execute(runWorker(), run.id, 1, 'parking-worker')).kind).toBe('parked');
    const kept = await liveLease(profileId);
    expect(kept).toMatchObject({ state: 'live' });

    const { key } = await store.createApiKey({ tenant: 't1', principal: 'alice', scopes: ['runs:write'] });
    const answer = await fetch(`${api.url}/v1/runs/${run.id}/cancel`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}` },
    });
    expect(answer.status).toBe(200);
    expect(await answer.json()).toMatchObject({ status: 'cancelled' });
    // No worker's end of execution runs for a parked run: the cancel itself closed the lease.
    expect(await leases.getLease({ tenant: 't1', id: profileId }, kept?.id ?? '')).toMatchObject({
      state: 'closed',
      closeReason: 'closed',
      sealed: true,
    });
  });

  it('fault 5: a parked run cancelled where its lease could not be released has it sealed and closed by the next upkeep pass', async () => {
    const { run, profileId } = await submitRun([
      { tool: 'browser.navigate', url: `${site.origin}/f5u` },
      press,
    ]);
    expect((await execute(runWorker(), run.id, 1, 'parking-worker')).kind).toBe('parked');
    const kept = await liveLease(profileId);
    // A cancel whose release never reached the browser worker: only the run store heard it.
    expect((await store.cancelRun('t1', run.id)).ok).toBe(true);
    expect(await leases.getLease({ tenant: 't1', id: profileId }, kept?.id ?? '')).toMatchObject({
      state: 'live',
    });

    // The lease is in the upkeep index of the run worker that executed the run, and no other's.
    const index = new LeaseUpkeepIndex(connection(), `${prefix}:`, leases);
    expect((await index.liveLeasesOf('rw-other')).map((lease) => lease.id)).not.toContain(kept?.id);
    const pass = await runLeaseUpkeep({
      leases: index.forWorker(RUN_WORKER_ID),
      runs: store,
      workers: registry,
      dataPlaneToken: TEST_TOKEN,
    });
    expect(pass.closed).toContain(kept?.id);
    expect(await leases.getLease({ tenant: 't1', id: profileId }, kept?.id ?? '')).toMatchObject({
      state: 'closed',
      sealed: true,
    });
  });

  it('fault 5: a run failed by the reclaim sweep after its worker died mid-run releases its lease', async () => {
    const { run, profileId } = await submitRun([
      { tool: 'browser.navigate', url: `${site.origin}/f5r` },
      press,
    ]);
    // The worker holds the run and its page, then dies: no end of execution ever runs.
    const dying = runWorker(
      (own) =>
        new Proxy(own, {
          get(target, property) {
            if (property === 'requestApproval')
              return async () => {
                throw new Error('the worker died');
              };
            const value = Reflect.get(target, property, target);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        }),
    );
    await expect(execute(dying, run.id, 1, 'dying-worker')).rejects.toThrow('the worker died');
    expect((await store.getRun(run.id))?.status).toBe('running');
    const held = await liveLease(profileId);
    expect(held).toMatchObject({ state: 'live', scope: { run_id: run.id } });

    // BullMQ gave up on the job past the worker retry limit (the real stall: test/browser/reclaim.test.ts).
    const reclaimed = await reclaimStalledRuns({
      failedJobs: async () => [
        { data: { runId: run.id, execution: 1 }, failedReason: 'job stalled more than allowable limit' },
      ],
      failRun: (runId, reason, options) => store.failRun(runId, reason, options),
      onRunEnded: async (ended) => {
        await releaseRunLease({ leases, workers: registry, dataPlaneToken: TEST_TOKEN }, ended);
      },
    });
    expect(reclaimed).toEqual([run.id]);
    expect(await store.getRun(run.id)).toMatchObject({ status: 'failed', error: { code: 'reclaimed' } });
    expect(await leases.getLease({ tenant: 't1', id: profileId }, held?.id ?? '')).toMatchObject({
      state: 'closed',
      sealed: true,
    });
  });
});
