import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** A page with a button, counting every document the browser asks for. */
function startSite(): Promise<{ server: Server; origin: string; documents: () => number }> {
  let documents = 0;
  const server = createServer((_request, response) => {
    documents += 1;
    response.setHeader('content-type', 'text/html');
    response.end('<!doctype html><title>Desk</title><h1>Desk</h1><button>Send</button>');
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        server,
        origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        documents: () => documents,
      }),
    ),
  );
}

describe('agent.delegate: a parent run waits on its child and resumes with its end', () => {
  let fleet: FleetHandle;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Awaited<ReturnType<typeof startSite>>;
  let sessionId: string;

  beforeAll(async () => {
    site = await startSite();
    fleet = await startTestFleet(uniquePrefix('delegation'));
    await call('POST', '/v1/profiles', { id: 'desk', allowed_origins: [site.origin] });
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Work the desk.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act', 'agent.delegate'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'desk',
    });
    sessionId = session.body.id;
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.server.close(resolve));
  });

  async function childOf(parentId: string) {
    const runs = await fleet.store.listRuns('dev', sessionId);
    return runs.find((run) => run.parent_run_id === parentId);
  }

  it('releases the parent page to its child, then resumes the parent with the child answer', async () => {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Check the desk twice',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${site.origin}/parent` },
          {
            tool: 'agent.delegate',
            input: 'Look at the desk',
            script: {
              steps: [{ tool: 'browser.navigate', url: `${site.origin}/child` }, { tool: 'browser.observe' }],
              answer: 'The desk has a Send button.',
            },
          },
          { tool: 'browser.navigate', url: `${site.origin}/parent-again` },
        ],
        answer: 'Checked.',
      },
    });
    expect(submitted.status).toBe(201);
    const done = await waitForStatus(submitted.body.id, ['succeeded', 'failed', 'cancelled']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Checked.' } });

    const child = await childOf(submitted.body.id);
    expect(child).toMatchObject({
      status: 'succeeded',
      session_id: sessionId,
      browser_profile_id: 'desk',
      result: { answer: 'The desk has a Send button.' },
    });
    // The child could take the profile's page: the waiting parent had released its lease.
    const childLedger = await fleet.store.listInvocations(child?.id ?? '');
    expect(
      childLedger.map((entry) => [entry.tool, entry.state, (entry.result as { ok: boolean }).ok]),
    ).toEqual([
      ['browser.navigate', 'completed', true],
      ['browser.observe', 'completed', true],
    ]);

    const ledger = await fleet.store.listInvocations(submitted.body.id);
    const delegated = ledger.find((entry) => entry.tool === 'agent.delegate');
    expect(delegated?.result).toMatchObject({
      ok: true,
      result: { run_id: child?.id, status: 'succeeded', answer: 'The desk has a Send button.' },
    });
    expect(ledger.at(-1)).toMatchObject({
      tool: 'browser.navigate',
      state: 'completed',
      result: { ok: true },
    });

    const events = await fleet.store.readEvents(submitted.body.id);
    const waiting = events.find((event) => event.type === 'run.waiting');
    expect(waiting?.data).toMatchObject({ status: 'waiting_child', child_run_id: child?.id });
    expect(events.filter((event) => event.type === 'run.requeued')).toHaveLength(1);
  });

  it('resumes the parent with a failed child, as the tool result, and goes on where the step may fail', async () => {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Delegate something impossible',
      script: {
        steps: [
          {
            tool: 'agent.delegate',
            // A script stops at a failing step unless it may fail.
            may_fail: true,
            input: 'Press a button that is not there',
            script: {
              steps: [
                { tool: 'browser.navigate', url: `${site.origin}/child` },
                { tool: 'browser.act', target: { role: 'button', name: 'Missing' }, action: 'click' },
              ],
              answer: 'never',
            },
          },
        ],
        answer: 'Reported the failure.',
      },
    });
    const done = await waitForStatus(submitted.body.id, ['succeeded', 'failed', 'cancelled']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Reported the failure.' } });
    const child = await childOf(submitted.body.id);
    expect(child).toMatchObject({ status: 'failed', error: { code: 'element_not_found', step: 2 } });
    const delegated = (await fleet.store.listInvocations(submitted.body.id)).find(
      (entry) => entry.tool === 'agent.delegate',
    );
    expect(delegated?.result).toMatchObject({ ok: false, code: 'child_failed' });
    expect((delegated?.result as { message?: string } | undefined)?.message).toContain('element_not_found');
  });

  it('cancels the waiting child with its parent', async () => {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Delegate an action that needs approval',
      script: {
        steps: [
          {
            tool: 'agent.delegate',
            input: 'Send it',
            script: {
              steps: [
                { tool: 'browser.navigate', url: `${site.origin}/child` },
                { tool: 'browser.act', target: { role: 'button', name: 'Send' }, action: 'click' },
              ],
              answer: 'Sent.',
            },
          },
        ],
        answer: 'Done.',
      },
    });
    const waiting = await waitForStatus(submitted.body.id, ['waiting_child', 'succeeded', 'failed']);
    expect(waiting.status).toBe('waiting_child');
    const child = await childOf(submitted.body.id);
    expect(waiting.waiting_on_run_id).toBe(child?.id);
    await waitForStatus(child?.id ?? '', ['parked']);

    const cancelled = await call('POST', `/v1/runs/${submitted.body.id}/cancel`);
    expect(cancelled.body.status).toBe('cancelled');
    expect(await waitForStatus(child?.id ?? '', ['cancelled', 'succeeded', 'failed'])).toMatchObject({
      status: 'cancelled',
    });
    expect((await call('GET', `/v1/approvals?run_id=${child?.id}`)).body.approvals).toEqual([]);
  });
});
