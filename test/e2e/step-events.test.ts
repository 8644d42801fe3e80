import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * A run's event stream says each step once (real fleet and Chromium): a run parked on its click's
 * approval and resumed after it sends one `step.started` and one `step.ended` per step, and one
 * `step.resumed` for the click, run again by the execution after the approval.
 */
describe('step events of a run that parks and resumes', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Shop</title><h1>Basket</h1><button>Buy</button>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('step-events'));
  });
  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  it('starts and ends each step once, and says the resumed click resumed', async () => {
    const sessionId = await boundSession({ profileId: 'step-events', origin, instructions: 'Buy.' });
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'buy',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/` },
          { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' },
        ],
        answer: 'bought',
      },
    });
    const runId = submitted.body.id as string;
    const parked = await eventually(
      () => call('GET', `/v1/runs/${runId}`),
      (answer) => answer.body.status === 'parked',
      60_000,
      100,
    );
    const approvalId = parked.body.pending_approvals[0].id as string;
    expect((await call('POST', `/v1/approvals/${approvalId}/approve`, {})).status).toBe(200);
    expect(await waitForStatus(runId, ['succeeded', 'failed', 'cancelled'], 60_000)).toMatchObject({
      status: 'succeeded',
    });

    const events = await fleet.store.readEvents(runId);
    const said = (type: string) =>
      events.filter((event) => event.type === type).map((event) => String(event.data.step_id));
    const steps = (await call('GET', `/v1/runs/${runId}/steps`)).body.steps.map(
      (step: { id: string }) => step.id,
    );
    expect(steps.length).toBeGreaterThanOrEqual(3);
    expect(said('step.started')).toEqual(steps);
    expect([...said('step.ended')].sort()).toEqual([...steps].sort());
    const click = steps.filter((id: string) => /-t\d+-\d+$/.test(id)).at(-1);
    expect(said('step.resumed')).toEqual([click]);
    // The click resumed after its approval, before it ended.
    const order = events.map((event) => `${event.type} ${event.data.step_id ?? ''}`.trim());
    expect(order.indexOf(`step.resumed ${click}`)).toBeGreaterThan(order.indexOf('approval.approved'));
    expect(order.indexOf(`step.ended ${click}`)).toBeGreaterThan(order.indexOf(`step.resumed ${click}`));
  });
});
