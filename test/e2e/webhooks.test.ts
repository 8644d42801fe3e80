import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { webhookEventSchema } from '../../libs/contracts/index.js';
import { standardWebhookKey, verifyWebhookSignature } from '../../libs/webhooks/index.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';
import { startWebhookReceiver, type WebhookReceiver } from '../fixtures/webhook-receiver.js';

/** True when the Standard Webhooks reference library accepts the delivery's headers. */
function standardlyVerified(secret: string, body: string, headers: Record<string, string>): boolean {
  try {
    new Webhook(standardWebhookKey(secret)).verify(body, headers);
    return true;
  } catch {
    return false;
  }
}

/**
 * Being told, through the whole fleet: a tenant's webhook hears that a scripted run on
 * a real page waits for an approval, then that it ended, and that a run cancelled through the API
 * ended — each once, each signed with the secret shown when the webhook was registered.
 */
describe('webhooks through the fleet: approval.requested and run.ended, signed, once each', {
  timeout: 90_000,
}, () => {
  let fleet: FleetHandle;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Server;
  let receiver: WebhookReceiver;
  let origin: string;
  let secret: string;

  beforeAll(async () => {
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>One button</title><h1>One button</h1><button>One</button>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    receiver = await startWebhookReceiver();
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    // The receiver is on loopback: a fleet refuses it unless told this is a local receiver.
    fleet = await startTestFleet(uniquePrefix('webhooks-e2e'), { LEASEHOLD_WEBHOOKS_ALLOW_PRIVATE: 'true' });
    const hook = await call('POST', '/v1/webhooks', {
      url: receiver.url,
    });
    expect(hook.status).toBe(201);
    secret = hook.body.secret;
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
    await receiver?.close();
  });

  async function submit(name: string, steps: unknown[]): Promise<string> {
    expect((await call('POST', '/v1/profiles', { id: name, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: `Click ${name}.`,
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id, browser_profile_id: name });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: `Click ${name}`,
      script: {
        steps: [{ tool: 'browser.navigate', url: `${origin}/${name}/` }, ...steps],
        answer: 'Clicked.',
      },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  /** What the receiver was told of the run: each event, whether its signature holds, its delivery id. */
  const toldOf = (runId: string) =>
    receiver.got
      .map(({ headers, body }) => ({
        event: webhookEventSchema.parse(JSON.parse(body)),
        verified:
          standardlyVerified(secret, body, headers as Record<string, string>) &&
          verifyWebhookSignature(secret, body, String(headers['leasehold-signature'])),
        delivery: String(headers['leasehold-delivery']),
      }))
      .filter((entry) => entry.event.run_id === runId);

  it('tells a parked run’s approval, then its end, once each and signed', async () => {
    const runId = await submit('told', [
      { tool: 'browser.act', target: { role: 'button', name: 'One' }, action: 'click' },
    ]);
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    const approvalId = parked.pending_approvals[0].id;

    const asked = await eventually(
      async () => toldOf(runId),
      (list) => list.length >= 1,
      15_000,
    );
    expect(asked.map((entry) => entry.event)).toMatchObject([
      { type: 'approval.requested', approval_id: approvalId, status: 'parked', link: `/runs/${runId}` },
    ]);

    expect((await call('POST', `/v1/approvals/${approvalId}/approve`, {})).status).toBe(200);
    expect((await waitForStatus(runId, ['succeeded', 'failed'])).status).toBe('succeeded');
    const all = await eventually(
      async () => toldOf(runId),
      (list) => list.length >= 2,
      15_000,
    );
    // Nothing but time can show an absence: a second telling of either would be a delivery the
    // worker picks up at once and posts over loopback; 1.5 s is room for one on a loaded machine,
    // and none may come.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    expect(toldOf(runId).map(({ event }) => [event.type, event.status])).toEqual([
      ['approval.requested', 'parked'],
      ['run.ended', 'succeeded'],
    ]);
    expect(all.every((entry) => entry.verified)).toBe(true);
  });

  it('tells the end of a run cancelled through the API', async () => {
    const runId = await submit('cancelled', [
      { tool: 'browser.act', target: { role: 'button', name: 'One' }, action: 'click' },
    ]);
    expect((await waitForStatus(runId, ['parked', 'succeeded', 'failed'])).status).toBe('parked');
    expect((await call('POST', `/v1/runs/${runId}/cancel`)).status).toBeLessThan(300);
    const ended = await eventually(
      async () => toldOf(runId).filter((entry) => entry.event.type === 'run.ended'),
      (list) => list.length >= 1,
      15_000,
    );
    expect(ended.map((entry) => [entry.event.status, entry.verified])).toEqual([['cancelled', true]]);
  });
});
