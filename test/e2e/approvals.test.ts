import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * Approvals and task grants through REST (DESIGN §3, §4.4): scripted runs click buttons on a real
 * page whose server counts every click, so a click sent without approval, or twice, would show.
 */
describe('approvals and task grants through REST, on a real page', { timeout: 60_000 }, () => {
  let fleet: FleetHandle;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let site: Server;
  let origin: string;
  let base: string;
  /** Clicks the server received, by path (`/<test>/click/<button>`). */
  const clicks = new Map<string, number>();

  beforeAll(async () => {
    // Any page path serves three buttons; each posts to `click/<name>` beside the page, then shows
    // a heading "Clicked <Name>" once the server has answered (the act's postcondition waits for it;
    // a heading, because observations list headings but not paragraphs).
    site = createServer((request, response) => {
      const path = request.url ?? '/';
      if (request.method === 'POST' && /\/click\/\w+$/.test(path)) {
        clicks.set(path, (clicks.get(path) ?? 0) + 1);
        return void response.end('ok');
      }
      const buttons = ['One', 'Two', 'Three']
        .map(
          (name) =>
            `<button onclick="fetch('click/${name.toLowerCase()}', {method: 'POST'}).then(() => document.body.insertAdjacentHTML('beforeend', '<h2>Clicked ${name}</h2>'))">${name}</button>`,
        )
        .join('');
      response.setHeader('content-type', 'text/html');
      response.end(`<!doctype html><title>Buttons</title><h1>Buttons</h1>${buttons}`);
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('approvals'));
    base = fleet.urls.api.replace(/\/v1$/, '');
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  /** Submits a scripted run in a session bound to a new profile `name`, on the page `/<name>/`. */
  async function submit(name: string, steps: unknown[], answer: string): Promise<string> {
    expect((await call('POST', '/v1/profiles', { id: name, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: `Click through ${name}.`,
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id, browser_profile_id: name });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: `Click through ${name}`,
      script: { steps: [{ tool: 'browser.navigate', url: `${origin}/${name}/` }, ...steps], answer },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  const click = (name: string) => ({
    tool: 'browser.act',
    target: { role: 'button', name },
    action: 'click',
    postcondition: { role: 'heading', name: `Clicked ${name}`, wait_ms: 2_000 },
  });
  const clicksOf = (name: string) =>
    ['one', 'two', 'three'].map((button) => clicks.get(`/${name}/click/${button}`) ?? 0);

  /** How each `browser.act` of the run ended in its ledger: its postcondition, or its error code. */
  /** Each act's postcondition result, as its step record tells it (or its failure's code). */
  async function actOutcomes(runId: string): Promise<string[]> {
    const { steps } = await fleet.store.listSteps(runId, 0, 100);
    return steps
      .filter((step) => step.tool?.name === 'browser.act')
      .map(({ tool, status }) => {
        if (!tool?.outcome) return status;
        return tool.outcome.ok ? (tool.postcondition?.result ?? 'none') : (tool.outcome.code ?? 'failed');
      });
  }

  /** The run's events as its Server-Sent Events stream gives them (it ends once the run has ended). */
  async function streamedEvents(
    runId: string,
  ): Promise<Array<{ type: string; data: Record<string, unknown> }>> {
    const stream = await fetch(`${base}/v1/runs/${runId}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    });
    const text = await stream.text();
    return [...text.matchAll(/^data: (.+)$/gm)].map((match) => JSON.parse(match[1] ?? '{}'));
  }

  it('runs three clicks on one approval whose grant covers each click after the approved one', async () => {
    const runId = await submit(
      'grant-covers',
      [{ tool: 'browser.observe' }, click('One'), click('Two'), click('Three')],
      'Clicked all three.',
    );
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    expect(parked.pending_approvals).toHaveLength(1);
    expect(clicksOf('grant-covers')).toEqual([0, 0, 0]);

    // The approved click itself is not charged: two further actions exhaust a grant of two.
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 2 },
    });
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ status: 'approved', grant_id: expect.stringMatching(/^grt_/) });

    const done = await waitForStatus(runId, ['succeeded', 'failed', 'parked']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Clicked all three.' } });
    expect(clicksOf('grant-covers')).toEqual([1, 1, 1]);
    expect(await actOutcomes(runId)).toEqual(['satisfied', 'satisfied', 'satisfied']);

    const events = await streamedEvents(runId);
    expect(events.filter((event) => event.type === 'approval.requested')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'run.parked')).toHaveLength(1);
    expect(events.filter((event) => event.type === 'grant.used').map((event) => event.data)).toEqual([
      { grant_id: approved.body.grant_id, used: 1, max_actions: 2 },
      { grant_id: approved.body.grant_id, used: 2, max_actions: 2 },
    ]);
    expect(await fleet.store.listApprovals(runId)).toHaveLength(1);
    expect(await fleet.store.listGrants(runId)).toMatchObject([
      { id: approved.body.grant_id, max_actions: 2, used_actions: 2 },
    ]);

    // A decided approval stays listed with its run: who decided, when, and the grant it gave.
    const decided = await call('GET', `/v1/approvals?run_id=${runId}&status=any`);
    expect(decided.status).toBe(200);
    expect(decided.body.approvals).toMatchObject([
      {
        id: approved.body.id,
        status: 'approved',
        decided_by: approved.body.decided_by,
        decided_at_ms: expect.any(Number),
        grant: { id: approved.body.grant_id, max_actions: 2, used_actions: 2 },
      },
    ]);
    expect((await call('GET', `/v1/approvals?run_id=${runId}&status=approved`)).body.approvals).toHaveLength(
      1,
    );
    expect((await call('GET', `/v1/approvals?run_id=${runId}&status=denied`)).body.approvals).toEqual([]);
    expect((await call('GET', `/v1/approvals?run_id=${runId}`)).body.approvals).toEqual([]);
    // Decided approvals are kept with their run only; an unknown status is refused.
    expect((await call('GET', '/v1/approvals?status=approved')).status).toBe(422);
    expect((await call('GET', `/v1/approvals?run_id=${runId}&status=maybe`)).status).toBe(422);
  });

  it('asks for a second approval once its grant has been used up by count', async () => {
    const runId = await submit('grant-runs-out', [click('One'), click('Two'), click('Three')], 'Done.');
    const first = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(first.status).toBe('parked');
    const approved = await call('POST', `/v1/approvals/${first.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 1 },
    });
    expect(approved.status).toBe(200);

    // One: approved. Two: the grant's only action. Three: no live grant, so the run parks again.
    const second = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(second.status).toBe('parked');
    expect(second.pending_approvals).toHaveLength(1);
    expect(second.pending_approvals[0].id).not.toBe(first.pending_approvals[0].id);
    expect(second.pending_approvals[0].invocation_id).not.toBe(first.pending_approvals[0].invocation_id);
    expect(clicksOf('grant-runs-out')).toEqual([1, 1, 0]);
    expect(await fleet.store.listGrants(runId)).toMatchObject([{ max_actions: 1, used_actions: 1 }]);

    expect((await call('POST', `/v1/approvals/${second.pending_approvals[0].id}/approve`, {})).status).toBe(
      200,
    );
    const done = await waitForStatus(runId, ['succeeded', 'failed', 'parked']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Done.' } });
    expect(clicksOf('grant-runs-out')).toEqual([1, 1, 1]);
    expect(await actOutcomes(runId)).toEqual(['satisfied', 'satisfied', 'satisfied']);
    const events = await streamedEvents(runId);
    expect(events.filter((event) => event.type === 'approval.requested')).toHaveLength(2);
    expect(events.filter((event) => event.type === 'grant.used').map((event) => event.data.used)).toEqual([
      1,
    ]);
  });

  it('hands a denial to the script as the tool result, never sends the click, and succeeds where the step may fail', async () => {
    // A denied step ends a script approval_denied unless the step may fail.
    const runId = await submit(
      'denied',
      [{ ...click('One'), may_fail: true }],
      'Not clicked, as the owner asked.',
    );
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    const denied = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/deny`, {
      reason: 'not this one',
    });
    expect(denied.status).toBe(200);
    expect(denied.body).toMatchObject({ status: 'denied', reason: 'not this one', grant_id: null });

    const done = await waitForStatus(runId, ['succeeded', 'failed', 'parked']);
    expect(done).toMatchObject({
      status: 'succeeded',
      result: { answer: 'Not clicked, as the owner asked.' },
    });
    expect(clicksOf('denied')).toEqual([0, 0, 0]);
    const acts = (await fleet.store.listInvocations(runId)).filter((entry) => entry.tool === 'browser.act');
    expect(acts).toHaveLength(1);
    expect(acts[0]).toMatchObject({
      invocation_id: parked.pending_approvals[0].invocation_id,
      state: 'completed',
      result: { ok: false, code: 'approval_denied', message: 'not this one' },
    });
    const types = (await streamedEvents(runId)).map((event) => event.type);
    expect(types).toContain('approval.denied');
    expect(types).not.toContain('grant.used');
  });

  it("answers 409 to a decision on a decided approval and 404 to another tenant's", async () => {
    const other = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'mallory',
      scopes: ['runs:read', 'runs:write', 'approvals:write'],
    });
    const runId = await submit('decided', [click('One')], 'Clicked.');
    const parked = await waitForStatus(runId, ['parked', 'succeeded', 'failed']);
    expect(parked.status).toBe('parked');
    const approvalPath = `/v1/approvals/${parked.pending_approvals[0].id}`;

    expect((await call('POST', `${approvalPath}/approve`, {}, { key: other.key })).status).toBe(404);
    expect(
      (await call('POST', `${approvalPath}/deny`, { reason: 'mine now' }, { key: other.key })).status,
    ).toBe(404);
    expect((await call('GET', `/v1/runs/${runId}`)).body).toMatchObject({
      status: 'parked',
      pending_approvals: [{ id: parked.pending_approvals[0].id, status: 'pending' }],
    });

    expect((await call('POST', `${approvalPath}/approve`, {})).status).toBe(200);
    const again = await call('POST', `${approvalPath}/approve`, {});
    expect(again).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });
    const late = await call('POST', `${approvalPath}/deny`, { reason: 'too late' });
    expect(late).toMatchObject({ status: 409, body: { error: { code: 'conflict' } } });

    const done = await waitForStatus(runId, ['succeeded', 'failed', 'parked']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Clicked.' } });
    expect(clicksOf('decided')).toEqual([1, 0, 0]);
    expect(await actOutcomes(runId)).toEqual(['satisfied']);
    expect(await fleet.store.listApprovals(runId)).toMatchObject([{ status: 'approved', reason: null }]);
  });
});
