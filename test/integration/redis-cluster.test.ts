import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Worker } from 'bullmq';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { ConfigError, loadConfig } from '../../libs/config/index.js';
import { RedisLeaseStore } from '../../libs/store/index.js';
import {
  closeRedis,
  connectRedis,
  createQueueWorker,
  type RedisClient,
  RUNS_QUEUE,
  type RunJob,
} from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { silentLogger } from '../fixtures/logger.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { startRedisCluster, type TestRedisCluster } from '../fixtures/redis-cluster.js';
import { restClient } from '../fixtures/rest.js';

const PROFILES = 3;
/** Runs on a loaded machine take their time; the wait says which run stopped where. */
const RUN_WAIT_MS = 90_000;
/**
 * Shrunk timings: the upkeep passes and the sweeper reclaims within seconds. The fleet's own job
 * lock keeps its default: under CI's load a 2 s lock with no retry reclaimed a healthy run; the
 * reclaim test's dying worker and its survivor bring their own short lock and stall check.
 */
const TIMINGS = {
  LEASE_UPKEEP_INTERVAL_MS: '300',
  SWEEP_INTERVAL_MS: '300',
  // BullMQ throttles every worker's stall check on one queue key, held for the interval of the
  // worker that checked last: the fleet's default 30 s held the survivor's 300 ms check off for
  // as long, and the reclaim case waited 30 s for it. The stall check reclaims only lapsed locks.
  RUN_STALLED_INTERVAL_MS: '1000',
};

/**
 * The fleet runs unchanged on a Redis Cluster given by REDIS_CLUSTER_NODES — three
 * masters made by the test, the whole fleet on them, driven through REST like the e2e tests.
 */
describe('the fleet on a three-master Redis Cluster', { timeout: 300_000 }, () => {
  const prefix = uniquePrefix('cluster');
  let cluster: TestRedisCluster;
  let fleet: FleetHandle;
  /** The test's own cluster connection, for what REST does not show (leases). */
  let redis: RedisClient;
  let leases: RedisLeaseStore;
  let site: Server;
  let origin: string;
  const clicks = new Map<string, number>();
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    cluster = await startRedisCluster();
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      if (request.method === 'POST' && path.endsWith('/click')) {
        clicks.set(path, (clicks.get(path) ?? 0) + 1);
        return void response.end('ok');
      }
      response.setHeader('content-type', 'text/html');
      response.end(
        `<!doctype html><title>Go</title><h1>Go</h1><button onclick="fetch('click', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Clicked</h2>'))">Go</button>`,
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(prefix, {
      REDIS_URL: '',
      REDIS_CLUSTER_NODES: cluster.nodes.join(','),
      QUEUE_PREFIX: `{${prefix}}`,
      ...TIMINGS,
    });
    redis = await connectRedis(
      { clusterNodes: fleet.config.redis.clusterNodes ?? [] },
      'worker',
      'test-cluster',
    );
    leases = new RedisLeaseStore(redis, `${prefix}:`);
  }, 120_000);

  afterAll(async () => {
    if (redis) await closeRedis(redis);
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
    await cluster?.stop();
  }, 120_000);

  /** A profile, a scripted agent and a bound session; then a run that clicks once (it needs approval). */
  async function submitClickRun(profileId: string): Promise<string> {
    expect((await call('POST', '/v1/profiles', { id: profileId, allowed_origins: [origin] })).status).toBe(
      201,
    );
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: `Click on ${profileId}.`,
      tools: ['browser.navigate', 'browser.act'],
    });
    expect(agent.status).toBe(201);
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profileId,
    });
    expect(session.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: `Click on ${profileId}`,
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/${profileId}/` },
          {
            tool: 'browser.act',
            target: { role: 'button', name: 'Go' },
            action: 'click',
            postcondition: { role: 'heading', name: 'Clicked', wait_ms: 2_000 },
          },
        ],
        answer: `Clicked ${profileId}.`,
      },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  async function upkeepPasses(): Promise<number> {
    const metric = await fleet.metrics.registry.getSingleMetric('leasehold_lease_upkeep_passes_total')?.get();
    return (metric?.values ?? []).reduce((sum, { value }) => sum + value, 0);
  }

  it('submits, parks on approval, keeps the leases up, approves, resumes and finishes runs', async () => {
    const profiles = Array.from({ length: PROFILES }, (_, index) => `shop-${index}`);
    const runIds = await Promise.all(profiles.map((profile) => submitClickRun(profile)));

    const parked = await Promise.all(
      runIds.map((runId) => waitForStatus(runId, ['parked', 'succeeded', 'failed'], RUN_WAIT_MS)),
    );
    expect(parked.filter((run) => run.status !== 'parked')).toEqual([]);
    expect([...clicks.values()]).toEqual([]);

    // Parked runs keep their leases (ADR-0127 d4): the upkeep reads every run and lease across
    // the masters, pass after pass, and leaves each lease live.
    const before = await upkeepPasses();
    expect(await eventually(upkeepPasses, (passes) => passes >= before + 3, 15_000)).toBeGreaterThanOrEqual(
      before + 3,
    );
    const live = await leases.listLiveLeases();
    expect(live.map((lease) => lease.profile.id).sort()).toEqual([...profiles].sort());
    expect((await fleet.store.runStates(runIds)).size).toBe(PROFILES);

    // The owner's queue of pending approvals lists each, and approving one resumes its run.
    const pending = await call('GET', '/v1/approvals');
    expect(pending.status).toBe(200);
    for (const run of parked) {
      const approvalId = run.pending_approvals[0].id;
      expect((await call('POST', `/v1/approvals/${approvalId}/approve`, {})).status).toBe(200);
    }
    const done = await Promise.all(
      runIds.map((runId) => waitForStatus(runId, ['succeeded', 'failed'], RUN_WAIT_MS)),
    );
    expect(done.map((run) => run.status)).toEqual(profiles.map(() => 'succeeded'));
    expect(profiles.map((profile) => clicks.get(`/${profile}/click`))).toEqual(profiles.map(() => 1));

    // Read back across the masters: the tenant's runs, the profiles, an ended run's event stream.
    const listed = await call('GET', '/v1/runs?limit=100');
    expect(listed.status).toBe(200);
    expect(listed.body.runs.map((run: { id: string }) => run.id)).toEqual(expect.arrayContaining(runIds));
    const profileList = await call('GET', '/v1/profiles');
    expect(profileList.status).toBe(200);
    const events = await fetch(`${fleet.urls.api}/runs/${runIds[0]}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(await events.text()).toContain('event: run.succeeded');
    // Every lease closed once its run ended.
    expect(
      await eventually(
        () => leases.listLiveLeases(),
        (left) => left.length === 0,
        15_000,
      ),
    ).toEqual([]);
  });

  it('fails a run whose worker stalled past the retry limit `reclaimed` and releases its lease', async () => {
    // The fleet's own run worker stops, so the run goes to a worker that takes it and its lease
    // and then dies without a word (its job lock lapses).
    await fleet.roles.runWorker.close();
    const runId = await submitClickRun('stalled');
    const target = { clusterNodes: fleet.config.redis.clusterNodes ?? [] };
    const timings = { concurrency: 1, lockDurationMs: 1_000, stalledIntervalMs: 300, maxStalledCount: 0 };
    let claimed!: () => void;
    const claimedOnce = new Promise<void>((resolve) => {
      claimed = resolve;
    });
    const dying: Worker<RunJob, void, string> = await createQueueWorker<RunJob, void>(
      RUNS_QUEUE,
      async (job, token) => {
        await fleet.store.claimRun(job.data.runId, job.data.execution, `${job.id}:${token}`);
        const lease = await fetch(`${fleet.urls.browserWorker}/v1/tenants/dev/profiles/stalled/leases`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${fleet.config.secrets.dataPlaneToken}`,
            'idempotency-key': randomUUID(),
            'content-type': 'application/json',
          },
          body: JSON.stringify({
            tenant: 'dev',
            principal: 'dev',
            run_id: job.data.runId,
            attempt: 1,
            requested_expires_at_ms: Date.now() + 600_000,
          }),
        });
        expect(lease.status).toBe(201);
        claimed();
        await new Promise(() => {});
      },
      { ...timings, redisUrl: target, prefix: `{${prefix}}`, logger: silentLogger() },
    );
    await claimedOnce;
    await dying.close(true);
    expect(await leases.liveLeaseId({ tenant: 'dev', id: 'stalled' })).toBeDefined();

    // Another worker's stall check fails the job; the fleet's sweeper fails the run and releases.
    const survivor = await createQueueWorker<RunJob, void>(RUNS_QUEUE, async () => {}, {
      ...timings,
      redisUrl: target,
      prefix: `{${prefix}}`,
      logger: silentLogger(),
    });
    try {
      const reclaimed = await waitForStatus(runId, ['failed', 'succeeded'], RUN_WAIT_MS);
      expect(reclaimed).toMatchObject({ status: 'failed', error: { code: 'reclaimed' } });
      expect(
        await eventually(
          () => leases.liveLeaseId({ tenant: 'dev', id: 'stalled' }),
          (id) => id === undefined,
          15_000,
        ),
      ).toBeUndefined();
    } finally {
      await survivor.close();
    }
  });

  it('counts requests per key and failed authentications per address on the cluster', async () => {
    const keysOnMasters = async (pattern: string) =>
      (await Promise.all(cluster.masters().map((master) => master.keys(pattern)))).flat();
    expect((await call('GET', '/v1/profiles')).status).toBe(200);
    expect(await keysOnMasters(`${prefix}:rate-limit:*`)).not.toEqual([]);
    expect((await call('GET', '/v1/profiles', undefined, { key: 'lhk_wrong' })).status).toBe(401);
    expect(await keysOnMasters(`${prefix}:auth-failures:*`)).not.toEqual([]);
  });

  it('spreads the fleet records over every master', async () => {
    const held = await Promise.all(cluster.masters().map((master) => master.keys(`${prefix}:*`)));
    expect(held.map((keys) => keys.length > 0)).toEqual([true, true, true]);
  });
});

describe('REDIS_CLUSTER_NODES in the configuration', () => {
  const cluster = {
    REDIS_CLUSTER_NODES: '10.0.0.1:7000, redis://lh:s3cret@10.0.0.2:7001',
    QUEUE_PREFIX: '{bull}',
  };

  it('takes host:port items and URLs, each as a URL', () => {
    expect(loadConfig(cluster).redis.clusterNodes).toEqual([
      'redis://10.0.0.1:7000',
      'redis://lh:s3cret@10.0.0.2:7001',
    ]);
    expect(loadConfig({}).redis.clusterNodes).toBeUndefined();
  });

  it('refuses a queue prefix without a hash tag, a key prefix with one, and REDIS_URL beside it', () => {
    expect(() => loadConfig({ ...cluster, QUEUE_PREFIX: 'bull' })).toThrow(
      /QUEUE_PREFIX: expected a hash tag/,
    );
    expect(() => loadConfig({ ...cluster, LEASEHOLD_KEY_PREFIX: '{lh}:' })).toThrow(
      /LEASEHOLD_KEY_PREFIX: expected no \{ \}/,
    );
    expect(() => loadConfig({ ...cluster, REDIS_URL: 'redis://10.0.0.1:6379' })).toThrow(ConfigError);
  });

  it('names a bad node list without the passwords in it', () => {
    expect(() => loadConfig({ REDIS_CLUSTER_NODES: 'redis://lh:s3cret@10.0.0.2:7001, not a node' })).toThrow(
      /REDIS_CLUSTER_NODES: .*redis:\/\/\*\*\*@10\.0\.0\.2/,
    );
    expect(() =>
      loadConfig({ REDIS_CLUSTER_NODES: 'redis://lh:s3cret@10.0.0.2:7001, not a node' }),
    ).not.toThrow(/s3cret/);
  });
});
