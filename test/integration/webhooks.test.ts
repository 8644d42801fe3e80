import type { Job, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../libs/config/index.js';
import { type RunView, webhookEventSchema } from '../../libs/contracts/index.js';
import { FOLLOW_UP_GRACE_MS, fleetLifecycle, RunLifecycle } from '../../libs/runtime/index.js';
import { FollowUpIndex, RunStore } from '../../libs/store/index.js';
import { WebhookStore } from '../../libs/store/webhooks.js';
import {
  standardWebhookKey,
  startWebhookWorker,
  verifyWebhookSignature,
  WebhookTeller,
  webhookDeliveryProcessor,
} from '../../libs/webhooks/index.js';
import {
  closeRedis,
  closeWorker,
  connectRedis,
  createRunsQueue,
  createWebhooksQueue,
  type RunsQueue,
  type WebhookJob,
  type WebhookJobResult,
} from '../../queues/index.js';
import { eventually } from '../fixtures/eventually.js';
import { silentLogger } from '../fixtures/logger.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';

describe('webhooks: signed deliveries of what the lifecycle tells, retried, once per event', () => {
  const prefix = uniquePrefix('webhooks');
  const config = loadConfig({
    REDIS_URL: testRedisUrl(),
    LEASEHOLD_KEY_PREFIX: `${prefix}:`,
    QUEUE_PREFIX: prefix,
    LOG_LEVEL: 'silent',
    LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true',
  });
  let redis: Redis;
  let store: RunStore;
  let hooks: WebhookStore;
  let queue: RunsQueue;
  let lifecycle: RunLifecycle;
  let worker: Worker<WebhookJob, WebhookJobResult, string>;
  const receivers: WebhookReceiver[] = [];

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-webhooks');
    store = new RunStore(redis, `${prefix}:`);
    hooks = new WebhookStore(redis, `${prefix}:`);
    queue = createRunsQueue(redis, prefix);
    lifecycle = fleetLifecycle({
      redis,
      keyPrefix: `${prefix}:`,
      store,
      queue,
      dataPlaneToken: undefined,
      runEnded: () => {},
      onError: () => {},
    });
    worker = await startWebhookWorker({ config, redisUrl: testRedisUrl(), redis, logger: silentLogger() });
  });
  afterAll(async () => {
    await closeWorker(worker, 5_000);
    await queue.close();
    for (const receiver of receivers) await receiver.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  async function receiverAndHook(tenant: string, answers: number[] = [], events?: string[]) {
    const receiver = await startWebhookReceiver(answers);
    receivers.push(receiver);
    const hook = await hooks.create({ tenant, url: receiver.url, events });
    if (!hook) throw new Error('webhook not created');
    return { ...receiver, hook };
  }

  /** A run of `tenant` ended by an API-style cancel through the lifecycle. */
  async function cancelledRun(tenant: string): Promise<RunView> {
    const session = await createTestSession(store, tenant, { instructions: 'x' });
    const run = await submitStoreRun(store, session, { tenant });
    const outcome = await lifecycle.cancel(tenant, run.id);
    if (!outcome.ok) throw new Error(outcome.message);
    return outcome.run;
  }

  /** Waits until no delivery job is waiting, running or delayed: every job added so far has run. */
  async function deliveriesDrained(): Promise<void> {
    const deliveries = createWebhooksQueue(redis, prefix);
    try {
      await expect
        .poll(async () => {
          const counts = await deliveries.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
          return Object.values(counts).reduce((sum, count) => sum + count, 0);
        })
        .toBe(0);
    } finally {
      await deliveries.close();
    }
  }

  it('signs each delivery so the receiver verifies it with the secret shown at creation', async () => {
    const { got, hook } = await receiverAndHook('sig');
    const run = await cancelledRun('sig');

    const received = await eventually(
      async () => got,
      (list) => list.length > 0,
      10_000,
    );
    expect(received).toHaveLength(1);
    const [delivery] = received;
    if (!delivery) throw new Error('no delivery');
    // Standard Webhooks: a receiver verifies with any of its libraries, here the reference one.
    const verifier = new Webhook(standardWebhookKey(hook.secret));
    const headers = delivery.headers as Record<string, string>;
    expect(verifier.verify(delivery.body, headers)).toEqual(JSON.parse(delivery.body));
    expect(() => new Webhook(standardWebhookKey(`${hook.secret}x`)).verify(delivery.body, headers)).toThrow();
    expect(() => verifier.verify(`${delivery.body} `, headers)).toThrow();
    expect(delivery.headers['webhook-id']).toBe(`${hook.id}-${run.id}-a1-cancelled`);
    // The older header, kept for one release beside them.
    const signature = String(delivery.headers['leasehold-signature']);
    expect(signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    expect(verifyWebhookSignature(hook.secret, delivery.body, signature)).toBe(true);
    expect(verifyWebhookSignature(`${hook.secret}x`, delivery.body, signature)).toBe(false);
    expect(verifyWebhookSignature(hook.secret, `${delivery.body} `, signature)).toBe(false);
    expect(delivery.headers['leasehold-event']).toBe('run.ended');
    expect(delivery.headers['leasehold-delivery']).toBe(`${hook.id}-${run.id}-a1-cancelled`);
    const event = webhookEventSchema.parse(JSON.parse(delivery.body));
    expect(event).toMatchObject({
      type: 'run.ended',
      tenant: 'sig',
      run_id: run.id,
      status: 'cancelled',
      approval_id: null,
      link: `/runs/${run.id}`,
    });
    const log = await eventually(
      () => hooks.deliveries('sig', hook.id),
      (list) => list.length > 0,
      5_000,
    );
    expect(log).toMatchObject([{ attempt: 1, ok: true, status_code: 200, error: null, event: 'run.ended' }]);
  });

  it('retries a delivery the receiver answered 500, and logs both attempts', async () => {
    const { got, hook } = await receiverAndHook('retry', [500]);
    await cancelledRun('retry');

    const received = await eventually(
      async () => got,
      (list) => list.length >= 2,
      15_000,
    );
    expect(received).toHaveLength(2);
    expect(received[1]?.body).toBe(received[0]?.body);
    expect(received[1]?.headers['leasehold-delivery']).toBe(received[0]?.headers['leasehold-delivery']);
    // A retry is the same message to a Standard Webhooks receiver: its id repeats, so it can drop it.
    expect(received[1]?.headers['webhook-id']).toBe(received[0]?.headers['leasehold-delivery']);
    const log = await eventually(
      () => hooks.deliveries('retry', hook.id),
      (list) => list.length >= 2,
      5_000,
    );
    expect(log.map(({ attempt, ok, status_code }) => ({ attempt, ok, status_code }))).toEqual([
      { attempt: 2, ok: true, status_code: 200 },
      { attempt: 1, ok: false, status_code: 500 },
    ]);
  });

  it('delivers one run.ended per run end and one approval.requested per approval, however often the follow-up runs', async () => {
    const all = await receiverAndHook('once');
    const endsOnly = await receiverAndHook('once', [], ['run.ended']);
    const other = await receiverAndHook('once-other');

    const session = await createTestSession(store, 'once', { instructions: 'x' });
    const run = await submitStoreRun(store, session, { tenant: 'once' });
    ran(await store.claimRun(run.id, 1, 'w1'));
    const { approvalId, transition } = await store.requestApproval(run.id, 'w1', {
      invocationId: 'a1:1:0',
      tool: 'browser.act',
      arguments: { ref: 'e1' },
    });
    const parked = ran(transition);
    await lifecycle.followUp(parked);
    await lifecycle.followUp(parked);
    const cancelled = await lifecycle.cancel('once', run.id);
    if (!cancelled.ok) throw new Error(cancelled.message);
    await lifecycle.followUpById(run.id);
    await lifecycle.followUp(cancelled.run, { ended: true });

    await eventually(
      async () => all.got,
      (list) => list.length >= 2,
      10_000,
    );
    await eventually(
      async () => endsOnly.got,
      (list) => list.length >= 1,
      10_000,
    );
    // Every delivery job ran: none is left to bring a second of either event. (Each follow-up above
    // was awaited, so any job it added is in the queue by now.)
    await deliveriesDrained();
    const events = all.got.map((delivery) => webhookEventSchema.parse(JSON.parse(delivery.body)));
    expect(events.map(({ type, approval_id }) => ({ type, approval_id }))).toEqual([
      { type: 'approval.requested', approval_id: approvalId },
      { type: 'run.ended', approval_id: null },
    ]);
    expect(events[0]).toMatchObject({ run_id: run.id, status: 'parked', link: `/runs/${run.id}` });
    expect(endsOnly.got).toHaveLength(1);
    expect(other.got).toHaveLength(0);
  });

  it('tells a webhook only what happened once it was registered, however late an event is told again', async () => {
    const before = await receiverAndHook('late');
    const cancelled = await cancelledRun('late');
    // Registered after the run ended (a later millisecond), then the run's end is told once more,
    // as a follow-up run again after a crash tells it.
    await expect.poll(() => Date.now()).toBeGreaterThan(cancelled.ended_at_ms ?? 0);
    const after = await receiverAndHook('late');
    await lifecycle.followUp(cancelled, { ended: true });

    await eventually(
      async () => before.got,
      (list) => list.length >= 1,
      10_000,
    );
    await deliveriesDrained();
    expect(before.got).toHaveLength(1);
    expect(after.got).toEqual([]);
    expect(await hooks.deliveries('late', after.hook.id)).toEqual([]);
  });

  it("tells a parked run's approval from the sweeper's look at a follow-up its worker never carried out", async () => {
    const { got } = await receiverAndHook('swept');
    let nowMs = Date.now();
    const swept = new RunLifecycle({
      store,
      followUps: new FollowUpIndex(redis, `${prefix}:`),
      enqueue: async () => {},
      clock: () => nowMs,
      webhooks: new WebhookTeller({
        hooks,
        queue: createWebhooksQueue(redis, prefix),
        approvals: store,
      }),
    });
    const session = await createTestSession(store, 'swept', { instructions: 'x' });
    const run = await submitStoreRun(store, session, { tenant: 'swept' });
    const claimed = ran(await store.claimRun(run.id, 1, 'w1'));
    await swept.owe(claimed);
    const { approvalId } = await store.requestApproval(run.id, 'w1', {
      invocationId: 'a1:1:0',
      tool: 'browser.act',
      arguments: { ref: 'e1' },
    });
    // The worker died here: no follow-up. The sweeper looks once the grace has passed.
    nowMs += FOLLOW_UP_GRACE_MS + 1;
    await swept.sweepFollowUps();
    const received = await eventually(
      async () => got,
      (list) => list.length > 0,
      10_000,
    );
    expect(received.map((delivery) => JSON.parse(delivery.body))).toMatchObject([
      { type: 'approval.requested', approval_id: approvalId, run_id: run.id },
    ]);
  });

  it('refuses at delivery a URL that is, or resolves to, a private address unless allowed', async () => {
    const receiver = await startWebhookReceiver();
    receivers.push(receiver);
    const deliver = webhookDeliveryProcessor({ hooks, allowPrivate: false });
    for (const url of [receiver.url, receiver.url.replace('127.0.0.1', 'localhost')]) {
      const hook = await hooks.create({ tenant: 'guard', url });
      if (!hook) throw new Error('webhook not created');
      const run = await cancelledRun('guard-runs');
      const job = {
        id: `${hook.id}-${run.id}-a1-cancelled`,
        attemptsMade: 0,
        data: {
          tenant: 'guard',
          webhookId: hook.id,
          event: {
            id: `${run.id}-a1-cancelled`,
            type: 'run.ended',
            tenant: 'guard',
            run_id: run.id,
            status: 'cancelled',
            error_code: null,
            approval_id: null,
            card: null,
            at_ms: 1,
            link: `/runs/${run.id}`,
          },
        },
      } as unknown as Job<WebhookJob, WebhookJobResult, string>;
      await expect(deliver(job, undefined, new AbortController().signal)).rejects.toMatchObject({
        name: 'UnrecoverableError',
      });
      expect(await hooks.deliveries('guard', hook.id)).toMatchObject([
        { ok: false, status_code: null, error: 'refused' },
      ]);
    }
    expect(receiver.got).toHaveLength(0);
  });
});
