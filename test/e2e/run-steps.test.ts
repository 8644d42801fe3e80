import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const PASSWORD = 'corr3ct-h0rse-Battery-77';

/** A sign-in page: the form posts back and a home page greets. */
function startLoginSite(): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    response.setHeader('content-type', 'text/html');
    if (request.method === 'POST') {
      request.resume();
      request.on('end', () => response.end('<!doctype html><title>Home</title><h1>Welcome back</h1>'));
      return;
    }
    // The password field says its role: ARIA gives a password input none, and the script finds
    // its target by role and name.
    response.end(`<!doctype html><title>Sign in</title><h1>Sign in</h1>
      <form method="post" action="/session">
        <label>User <input name="user" value="ada"></label>
        <label>Password <input type="password" role="textbox" name="password"></label>
        <button type="submit">Sign in</button>
      </form>`);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    ),
  );
}

/**
 * A scripted run signs in on a real page (navigate, a password
 * typed on its approval, a click) and its steps read back through REST as the run did them — the
 * model turns with the calls they asked for, each tool call with its recorded arguments (the
 * password as `[secret]`), settle, page, postcondition and duration — and stream live as
 * `step.started` / `step.ended`. The runs list pages and filters one tenant's runs only.
 */
describe('steps and the runs list through the fleet', { timeout: 120_000 }, () => {
  const prefix = uniquePrefix('run-steps');
  let fleet: FleetHandle;
  let site: Awaited<ReturnType<typeof startLoginSite>>;
  let otherKey: string;
  const { call, waitForStatus, boundSession } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let sessionId: string;
  let signInRun: string;

  beforeAll(async () => {
    site = await startLoginSite();
    fleet = await startTestFleet(prefix);
    ({ key: otherKey } = await fleet.store.createApiKey({
      tenant: 'other-tenant',
      principal: 'mallory',
      scopes: ['runs:read', 'runs:write'],
    }));
    sessionId = await boundSession({ profileId: 'login', origin: site.origin, instructions: 'Sign in.' });
  });
  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.server.close(resolve));
    const redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-steps-cleanup');
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  async function submit(steps: unknown[], answer: string): Promise<string> {
    const run = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'Sign in',
      script: { steps, answer },
    });
    expect(run.status).toBe(201);
    return run.body.id;
  }

  it('shows each model turn and tool call of a run, the password withheld, live on the event stream', async () => {
    signInRun = await submit(
      [
        { tool: 'browser.navigate', url: `${site.origin}/` },
        {
          tool: 'browser.act',
          target: { role: 'textbox', name: 'Password' },
          action: 'fill',
          text: PASSWORD,
        },
        {
          tool: 'browser.act',
          target: { role: 'button', name: 'Sign in' },
          action: 'click',
          postcondition: { role: 'heading', name: 'Welcome back', wait_ms: 5_000 },
        },
      ],
      'Signed in.',
    );
    const parked = await waitForStatus(signInRun, ['parked', 'succeeded', 'failed'], 60_000);
    expect(parked.status).toBe('parked');
    // The waiting step is written once the park (and its preview call beside it) returned.
    await expect
      .poll(async () => (await call('GET', `/v1/runs/${signInRun}/steps`)).body.steps.at(-1)?.status, {
        timeout: 15_000,
      })
      .toBe('waiting_approval');
    const waiting = (await call('GET', `/v1/runs/${signInRun}/steps`)).body.steps.at(-1);
    expect(waiting).toMatchObject({
      id: 'a1-t2-0',
      kind: 'tool',
      status: 'waiting_approval',
      tool: {
        name: 'browser.act',
        approval_id: parked.pending_approvals[0].id,
        arguments: { text: '[secret]' },
      },
    });
    // The live stream, opened while the run waits: it ends once the run has ended.
    const stream = fetch(`${fleet.urls.api.replace(/\/v1$/, '')}/v1/runs/${signInRun}/events`, {
      headers: { authorization: `Bearer ${fleet.apiKey}` },
    }).then((answer) => answer.text());
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 5 },
    });
    expect(approved.status).toBe(200);
    const done = await waitForStatus(signInRun, ['succeeded', 'failed'], 60_000);
    expect(done).toMatchObject({ status: 'succeeded' });

    const answer = await call('GET', `/v1/runs/${signInRun}/steps`);
    expect(answer.status).toBe(200);
    const steps = answer.body.steps;
    expect(JSON.stringify(answer.body)).not.toContain(PASSWORD);
    expect(
      steps.map((step: { id: string; seq: number; status: string }) => [step.id, step.seq, step.status]),
    ).toEqual([
      ['a1-m1', 1, 'ended'],
      ['a1-t1-0', 2, 'ended'],
      ['a1-m2', 3, 'ended'],
      ['a1-t2-0', 4, 'ended'],
      ['a1-m3', 5, 'ended'],
      ['a1-t3-0', 6, 'ended'],
      ['a1-m4', 7, 'ended'],
    ]);
    const [model1, navigate, , fill, , click, last] = steps;
    expect(model1.model).toMatchObject({ tool_calls: [{ name: 'browser.navigate' }], answered: false });
    expect(last.model).toMatchObject({ tool_calls: [], answered: true });
    expect(navigate.tool).toMatchObject({
      name: 'browser.navigate',
      arguments: { url: `${site.origin}/` },
      outcome: { ok: true, code: null },
      settle: { result: expect.stringMatching(/^(dom_quiet|bound_expired)$/) },
      page: { url: `${site.origin}/`, title: 'Sign in' },
    });
    expect(fill.tool).toMatchObject({
      name: 'browser.act',
      arguments: { action: 'fill', text: '[secret]' },
      outcome: { ok: true },
      approval_id: parked.pending_approvals[0].id,
    });
    expect(click.tool).toMatchObject({
      arguments: { action: 'click' },
      postcondition: { result: 'satisfied' },
      page: { title: 'Home' },
    });
    for (const step of steps) {
      expect(step.duration_ms).toBeGreaterThanOrEqual(0);
      expect(step.ended_at_ms).toBeGreaterThanOrEqual(step.started_at_ms);
    }

    const streamed = [...(await stream).matchAll(/^data: (.+)$/gm)].map((match) =>
      JSON.parse(match[1] ?? '{}'),
    );
    const stepEvents = streamed.filter((event) => event.type?.startsWith('step.'));
    // Opened mid-run, the stream replays from the start: every step started and ended on it.
    for (const step of steps) {
      expect(
        stepEvents.filter((event) => event.type === 'step.ended' && event.data.step_id === step.id),
      ).toHaveLength(1);
      expect(
        stepEvents.some((event) => event.type === 'step.started' && event.data.step_id === step.id),
      ).toBe(true);
    }
    expect(JSON.stringify(streamed)).not.toContain(PASSWORD);

    // Another tenant's run is 404; a bad cursor or limit is 400.
    expect((await call('GET', `/v1/runs/${signInRun}/steps`, undefined, { key: otherKey })).status).toBe(404);
    expect((await call('GET', `/v1/runs/${signInRun}/steps?limit=0`)).status).toBe(400);
    expect((await call('GET', `/v1/runs/${signInRun}/steps?cursor=x`)).body.error.code).toBe('bad_request');
    const paged = await call('GET', `/v1/runs/${signInRun}/steps?limit=4`);
    expect(paged.body.steps).toHaveLength(4);
    const rest = await call('GET', `/v1/runs/${signInRun}/steps?limit=4&cursor=${paged.body.next_cursor}`);
    expect(rest.body).toMatchObject({ next_cursor: null });
    expect(rest.body.steps.map((step: { seq: number }) => step.seq)).toEqual([5, 6, 7]);
  });

  it("lists the tenant's runs newest first, filtered and paged, and none to another tenant", async () => {
    const quick = await submit([], 'Nothing to do.');
    await waitForStatus(quick, ['succeeded'], 60_000);
    const all = await call('GET', '/v1/runs');
    expect(all.status).toBe(200);
    expect(all.body.runs.map((run: { id: string }) => run.id)).toEqual([quick, signInRun]);
    expect(all.body.next_cursor).toBeNull();

    const first = await call('GET', '/v1/runs?limit=1');
    const second = await call('GET', `/v1/runs?limit=1&cursor=${first.body.next_cursor}`);
    expect([first.body.runs[0].id, second.body.runs[0].id]).toEqual([quick, signInRun]);
    expect(
      (await call('GET', `/v1/runs?session_id=${sessionId}&profile_id=login&status=succeeded`)).body.runs,
    ).toHaveLength(2);
    expect((await call('GET', '/v1/runs?status=failed')).body.runs).toEqual([]);
    expect((await call('GET', '/v1/runs?profile_id=elsewhere')).body.runs).toEqual([]);
    const created = all.body.runs[0].created_at_ms;
    expect(
      (await call('GET', `/v1/runs?created_before=${created}`)).body.runs.map(
        (run: { id: string }) => run.id,
      ),
    ).toEqual([signInRun]);
    expect(
      (await call('GET', `/v1/runs?created_after=${created - 1}`)).body.runs.map(
        (run: { id: string }) => run.id,
      ),
    ).toEqual([quick]);

    expect((await call('GET', '/v1/runs', undefined, { key: otherKey })).body).toEqual({
      runs: [],
      next_cursor: null,
    });
    for (const query of ['limit=101', 'limit=abc', 'cursor=nope', 'created_after=yesterday'])
      expect({ query, status: (await call('GET', `/v1/runs?${query}`)).status }).toEqual({
        query,
        status: 400,
      });

    const docs = await call('GET', '/docs/json');
    for (const path of ['/v1/runs', '/v1/runs/{id}/steps'])
      expect(
        docs.body.paths[path]?.get?.responses?.['200']?.content?.['application/json']?.schema,
      ).toBeDefined();
  });
});
