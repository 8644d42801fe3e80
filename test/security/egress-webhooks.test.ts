import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { WebhookStore } from '../../libs/store/webhooks.js';
import { webhookDeliveryProcessor } from '../../libs/webhooks/index.js';
import { closeRedis, connectRedis, type WebhookJob, type WebhookJobResult } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { closedLoopbackPort } from '../fixtures/closed-port.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';

/**
 * DESIGN §12: webhooks go through the one address guard — the IPv6 forms that carry a loopback
 * address are refused like it — and what a tenant reads of a failed delivery is one word
 * (`unreachable`, `refused`, `timeout`, `bad_status`), never the system's error, which would map
 * which hosts and ports of the fleet's network answer.
 */
describe('webhooks and the egress guard', () => {
  const prefix = uniquePrefix('egress-hooks');
  let api: ApiHandle;
  let redis: Redis;
  let hooks: WebhookStore;
  let admin: string;
  let receiver: WebhookReceiver;
  let receiverPort: number;
  const answers: number[] = [];

  beforeAll(async () => {
    api = await startTestApi(prefix);
    admin = (await api.store.createApiKey({ tenant: 'eh', principal: 'root', scopes: ['admin'] })).key;
    redis = await connectRedis(testRedisUrl(), 'producer', 'test-egress-hooks');
    hooks = new WebhookStore(redis, `${prefix}:`);
    receiver = await startWebhookReceiver(answers);
    receiverPort = receiver.port;
  });

  afterAll(async () => {
    await api?.close();
    await receiver?.close();
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  it('refuses to register a URL on an IPv6 address that embeds a loopback address', async () => {
    for (const host of ['[::127.0.0.1]', '[::ffff:0:127.0.0.1]', '[::ffff:127.0.0.1]', '[64:ff9b::7f00:1]']) {
      const url = `http://${host}:${receiverPort}/hook`;
      const answer = await fetch(`${api.url}/v1/webhooks`, {
        method: 'POST',
        headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' },
        body: JSON.stringify({ url }),
      });
      expect({ url, status: answer.status }).toEqual({ url, status: 422 });
      expect(((await answer.json()) as { error: { code: string } }).error.code).toBe('validation_failed');
    }
    expect(receiver.got).toHaveLength(0);
  });

  const job = (webhookId: string, n: number) =>
    ({
      id: `${webhookId}-run_egress${n}-a1-cancelled`,
      attemptsMade: 0,
      data: {
        tenant: 'eh',
        webhookId,
        event: {
          id: `run_egress${n}-a1-cancelled`,
          type: 'run.ended',
          tenant: 'eh',
          run_id: `run_egress${n}`,
          status: 'cancelled',
          error_code: null,
          approval_id: null,
          card: null,
          at_ms: 1,
          link: `/runs/run_egress${n}`,
        },
      },
    }) as unknown as Job<WebhookJob, WebhookJobResult, string>;

  async function deliverOnce(url: string, allowPrivate: boolean, n: number): Promise<unknown> {
    const hook = await hooks.create({ tenant: 'eh', url });
    if (!hook) throw new Error('webhook not created');
    const deliver = webhookDeliveryProcessor({ hooks, allowPrivate, timeoutMs: 2_000 });
    await deliver(job(hook.id, n), undefined, new AbortController().signal).catch(() => undefined);
    const [logged] = await hooks.deliveries('eh', hook.id);
    return logged;
  }

  it('refuses at delivery an embedded loopback address stored before the guard knew it', async () => {
    for (const [index, host] of ['[::127.0.0.1]', '[::ffff:0:127.0.0.1]'].entries())
      expect(await deliverOnce(`http://${host}:${receiverPort}/hook`, false, index)).toMatchObject({
        ok: false,
        status_code: null,
        error: 'refused',
      });
    expect(receiver.got).toHaveLength(0);
  });

  it('tells a tenant only unreachable, refused or bad_status, never the system error', async () => {
    const closedPort = await closedLoopbackPort();
    expect(await deliverOnce(`http://127.0.0.1:${closedPort}/hook`, true, 10)).toMatchObject({
      ok: false,
      status_code: null,
      error: 'unreachable',
    });
    expect(await deliverOnce('http://no-such-host.invalid/hook', true, 11)).toMatchObject({
      error: 'unreachable',
    });
    expect(await deliverOnce(`http://127.0.0.1:${receiverPort}/hook`, false, 12)).toMatchObject({
      error: 'refused',
    });
    answers.push(500);
    expect(await deliverOnce(`http://127.0.0.1:${receiverPort}/hook`, true, 13)).toMatchObject({
      ok: false,
      status_code: 500,
      error: 'bad_status',
    });
    expect(await deliverOnce(`http://127.0.0.1:${receiverPort}/hook`, true, 14)).toMatchObject({
      ok: true,
      status_code: 200,
      error: null,
    });
  });
});
