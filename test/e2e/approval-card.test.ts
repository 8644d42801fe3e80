import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * Approval cards, through the whole fleet: a scripted run on a real page that parks on
 * its act shows the person deciding the target's role and name, the action, the page's URL and
 * title as the run observed them, and a screenshot of that page with the target outlined.
 */
describe('a parked run’s approval carries its card', { timeout: 90_000 }, () => {
  let fleet: FleetHandle;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Server;
  let origin: string;

  beforeAll(async () => {
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end(
        '<!doctype html><title>Checkout</title><h1>Checkout</h1><button>Pay now</button><button>Cancel</button>',
      );
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('approval-card'));
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  it('shows the element, the action, the page and the outlined screenshot of a pending act', async () => {
    expect((await call('POST', '/v1/profiles', { id: 'checkout', allowed_origins: [origin] })).status).toBe(
      201,
    );
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Pay.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'checkout',
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Pay',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/checkout/` },
          { tool: 'browser.act', target: { role: 'button', name: 'Pay now' }, action: 'click' },
        ],
        answer: 'Paid.',
      },
    });
    expect(run.status).toBe(201);
    const runId = run.body.id as string;
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    const approvalId = parked.pending_approvals[0].id as string;

    const listed = await call('GET', `/v1/approvals?run_id=${runId}`);
    expect(listed.status).toBe(200);
    const approval = { body: listed.body.approvals.find((a: { id: string }) => a.id === approvalId) };
    expect(approval.body.card).toMatchObject({
      element: { role: 'button', name: 'Pay now' },
      action: 'click',
      page_url: `${origin}/checkout/`,
      page_title: 'Checkout',
    });
    const name = approval.body.card.screenshot as string;
    expect(name).toMatch(/^preview-[A-Za-z0-9_-]+\.jpg$/);
    // DESIGN §12: the preview is taken beside the approval's write; the card says when it is stored.
    await expect
      .poll(
        async () => (await call('GET', `/v1/runs/${runId}`)).body.pending_approvals[0].card.screenshot_status,
        {
          timeout: 30_000,
        },
      )
      .toEqual({ state: 'stored', reason: null });
    const stored = await fleet.artifacts.get({ tenant: parked.tenant, runId, name });
    expect(stored?.contentType).toBe('image/jpeg');
    expect(stored?.bytes.length).toBeGreaterThan(1_000);

    // The run's own view of its approvals shows the same card.
    const { screenshot_status: _status, ...card } = approval.body.card;
    expect(parked.pending_approvals[0].card).toMatchObject(card);
  });
});
