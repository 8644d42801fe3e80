import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** A shop page: a Buy button whose click the server counts (so a duplicate effect would show). */
function startShop(): Promise<{ server: Server; origin: string; purchases: () => number }> {
  let purchases = 0;
  const server = createServer((request, response) => {
    if (request.url === '/buy' && request.method === 'POST') {
      purchases += 1;
      response.end('ok');
      return;
    }
    response.setHeader('content-type', 'text/html');
    response.end(`<!doctype html><title>Shop</title><h1>Basket</h1>
      <button onclick="fetch('/buy', {method: 'POST'}).then(() => { document.body.insertAdjacentHTML('beforeend', '<h2>Thank you</h2>'); })">Buy</button>`);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        purchases: () => purchases,
      }),
    ),
  );
}

describe('a scripted run through REST, on a real page', () => {
  let fleet: FleetHandle;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let shop: Awaited<ReturnType<typeof startShop>>;
  let base: string;

  beforeAll(async () => {
    const prefix = uniquePrefix('runs');
    shop = await startShop();
    fleet = await startTestFleet(prefix);
    base = fleet.urls.api.replace(/\/v1$/, '');
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => shop?.server.close(resolve));
  });

  it('navigates, parks on its action, is approved, clicks once, succeeds and seals its lease', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'shop', allowed_origins: [shop.origin] })).status).toBe(
      201,
    );
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Buy what is in the basket.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    expect(agent.status).toBe(201);
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'shop',
    });
    expect(session.status).toBe(201);

    const submission = {
      input: 'Buy the basket',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${shop.origin}/` },
          {
            tool: 'browser.act',
            target: { role: 'button', name: 'Buy' },
            action: 'click',
            postcondition: { role: 'heading', name: 'Thank you', wait_ms: 2000 },
          },
        ],
        answer: 'Bought.',
      },
    };
    const submitted = await call('POST', `/v1/sessions/${session.body.id}/runs`, submission, {
      headers: { 'idempotency-key': 'order-1' },
    });
    expect(submitted.status).toBe(201);
    const again = await call('POST', `/v1/sessions/${session.body.id}/runs`, submission, {
      headers: { 'idempotency-key': 'order-1' },
    });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(submitted.body.id);

    const parked = await waitForStatus(submitted.body.id, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    expect(parked.pending_approvals).toHaveLength(1);
    expect(parked.pending_approvals[0]).toMatchObject({ tool: 'browser.act', status: 'pending' });
    expect(shop.purchases()).toBe(0);

    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {});
    expect(approved.status).toBe(200);
    const done = await waitForStatus(submitted.body.id, ['succeeded', 'failed']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Bought.' }, attempt: 1 });
    expect(shop.purchases()).toBe(1);
    const act = (await fleet.store.listInvocations(submitted.body.id)).find(
      (entry) => entry.tool === 'browser.act',
    );
    // The ledger keeps that the act succeeded; its step, the postcondition a person reads.
    expect(act?.result).toEqual({ ok: true });
    const { steps } = await fleet.store.listSteps(submitted.body.id, 0, 100);
    const actStep = steps.find((step) => step.tool?.name === 'browser.act');
    expect(actStep?.tool?.postcondition?.result).toBe('satisfied');

    // The worker seals and closes the lease right after it writes the run's end.
    const sealedBy = Date.now() + 10_000;
    let profile: { sealed: boolean } | undefined;
    do {
      profile = (await call('GET', '/v1/profiles')).body.profiles.find(
        (candidate: { id: string }) => candidate.id === 'shop',
      );
      if (profile?.sealed) break;
      await new Promise((resolve) => setTimeout(resolve, 100));
    } while (Date.now() < sealedBy);
    expect(profile?.sealed).toBe(true);
  });

  it('answers 404 to another tenant and 422 to a bad body, storing nothing', async () => {
    const other = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'o',
      scopes: ['runs:read', 'runs:write'],
    });
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: '' });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'hello',
      script: { steps: [], answer: 'hi' },
    });
    expect((await call('GET', `/v1/runs/${run.body.id}`, undefined, { key: other.key })).status).toBe(404);
    expect((await call('GET', `/v1/sessions/${session.body.id}`, undefined, { key: other.key })).status).toBe(
      404,
    );

    const bad = await call('POST', `/v1/sessions/${session.body.id}/runs`, { input: '' });
    expect(bad.status).toBe(422);
    expect(bad.body.error.code).toBe('validation_failed');
    expect((await call('GET', '/v1/runs/nope')).status).toBe(422);
    expect((await call('GET', `/v1/runs/${run.body.id}`, undefined, { key: 'lhk_wrong' })).status).toBe(401);
    const done = await waitForStatus(run.body.id, ['succeeded', 'failed']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'hi' } });

    // Its events as Server-Sent Events: the stream ends once the run has ended and all were sent.
    const stream = await fetch(`${base}/v1/runs/${run.body.id}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    expect(stream.headers.get('content-type')).toContain('text/event-stream');
    const text = await stream.text();
    const types = [...text.matchAll(/^event: (\S+)$/gm)].map((match) => match[1]);
    expect(types[0]).toBe('run.submitted');
    expect(types.at(-1)).toBe('run.succeeded');
    expect(text).toMatch(/^id: \S+$/m);
  });
});
