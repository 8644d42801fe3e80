import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { restApiDocument } from '../../apps/api/routes/index.js';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

interface Operation {
  operationId: string;
  requestBody?: { content: Record<string, { example?: unknown }> };
}

/** One operation of the API document, with its path and method. */
interface Route {
  method: string;
  path: string;
  operationId: string;
  example: unknown;
}

/** The operations a person's page is reached by: every one addressing a run or a profile by id. */
async function pageRoutes(): Promise<Route[]> {
  const document = (await restApiDocument()) as { paths: Record<string, Record<string, Operation>> };
  return Object.entries(document.paths).flatMap(([path, operations]) =>
    /^\/v1\/(runs|profiles)\/\{id\}/.test(path)
      ? Object.entries(operations).map(([method, operation]) => ({
          method: method.toUpperCase(),
          path,
          operationId: operation.operationId,
          example: operation.requestBody?.content['application/json']?.example,
        }))
      : [],
  );
}

/** What this feature added: the enumeration must hold them all, or it looks in the wrong place. */
const PERSON_OPERATIONS = [
  'watchRunPage',
  'sendRunPageInput',
  'takeOverRun',
  'handBackRun',
  'startProfileSignIn',
  'getProfileSignIn',
  'beatProfileSignIn',
  'watchProfileSignIn',
  'sendProfileSignInInput',
  'finishProfileSignIn',
  'cancelProfileSignIn',
];

/**
 * Across tenants a person's page is not there: every route that reaches a run or a profile by id
 * (read from the API document, so a route added later is called too) answers another tenant 404,
 * with its key and with its run-page session, while the page is live — a parked run's lease and an
 * open sign-in — and so do the run page and the sign-in page.
 */
describe("another tenant and a person's page", { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let site: Server;
  let origin: string;
  let base: string;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  let runId: string;
  let signInId: string;
  let artifact: string;
  let otherKey: string;
  let otherSession: { cookie: string; csrf: string };

  beforeAll(async () => {
    site = createServer((_request, response) => {
      response.setHeader('content-type', 'text/html');
      response.end('<!doctype html><title>Shop</title><button>Continue</button>');
    });
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(site.address() as AddressInfo).port}`;
    fleet = await startTestFleet(uniquePrefix('person-tenancy'));
    base = fleet.urls.api.replace(/\/v1$/, '');

    // A run parked on its act's approval: its lease stays live on the site's page.
    for (const id of ['run-page', 'signing'])
      expect((await call('POST', '/v1/profiles', { id, allowed_origins: [origin] })).status).toBe(201);
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Continue.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const session = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: 'run-page',
    });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Continue',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${origin}/` },
          { tool: 'browser.act', target: { role: 'button', name: 'Continue' }, action: 'click' },
        ],
        answer: 'Done.',
      },
    });
    runId = run.body.id;
    expect((await waitForStatus(runId, ['parked', 'succeeded', 'failed'])).status).toBe('parked');
    // A real artifact of the run, once stored: its route is called by its name too.
    type Step = { tool: { screenshot: string | null; screenshot_status: { state: string } | null } | null };
    const stored = (steps: Step[]) =>
      steps.find((step) => step.tool?.screenshot && step.tool.screenshot_status?.state !== 'pending')?.tool
        ?.screenshot;
    const steps = await eventually(
      async () => (await call('GET', `/v1/runs/${runId}/steps`)).body.steps as Step[],
      (read) => typeof stored(read) === 'string',
      30_000,
      100,
    );
    artifact = stored(steps) ?? 'none.jpg';

    const started = await call('POST', '/v1/profiles/signing/sign-in', { url: `${origin}/login` });
    expect(started.status, JSON.stringify(started.body)).toBe(201);
    signInId = started.body.signin_id;

    otherKey = (
      await fleet.store.createApiKey({
        tenant: 'other',
        principal: 'mallory',
        scopes: ['admin', 'runs:read', 'runs:write', 'approvals:write', 'approvals:any'],
      })
    ).key;
    otherSession = await sessionOf(otherKey);
  });

  afterAll(async () => {
    await fleet?.close();
    await new Promise((resolve) => site?.close(resolve));
  });

  /** A run-page session of `key`: its cookie and its CSRF token, as the sign-in form gives them. */
  async function sessionOf(key: string): Promise<{ cookie: string; csrf: string }> {
    const signedIn = await fetch(`${base}/signin`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', origin: new URL(base).origin },
      body: new URLSearchParams({ key, next: '/runs' }).toString(),
    });
    expect(signedIn.status).toBe(303);
    const cookie = (signedIn.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
    const page = await fetch(`${base}/runs`, { headers: { cookie } });
    const csrf = /name="csrf-token" content="([^"]+)"/.exec(await page.text())?.[1] ?? '';
    expect(csrf).not.toBe('');
    return { cookie, csrf };
  }

  const pathOf = (route: Route) =>
    route.path
      .replace('{id}', route.path.startsWith('/v1/runs/') ? runId : 'signing')
      .replace('{signin}', signInId)
      .replace('{name}', artifact)
      // A well-formed file id: a malformed one is refused (400) before any tenant is looked at.
      .replace('{file}', 'fil_0a1b2c3d4e5f6a7b');

  /** The status of one request; a stream's answer is read no further than its status. */
  async function statusOf(route: Route, headers: Record<string, string>): Promise<number> {
    const stop = new AbortController();
    const response = await fetch(`${base}${pathOf(route)}`, {
      method: route.method,
      headers: {
        ...headers,
        ...(route.example !== undefined ? { 'content-type': 'application/json' } : {}),
      },
      ...(route.example !== undefined ? { body: JSON.stringify(route.example) } : {}),
      signal: stop.signal,
    });
    stop.abort();
    return response.status;
  }

  it('enumerates every route of a run or a profile, the person routes among them', async () => {
    const ids = (await pageRoutes()).map((route) => route.operationId);
    expect(ids).toEqual(expect.arrayContaining(PERSON_OPERATIONS));
  });

  it("answers 404 to another tenant's key on every route of a run or a profile", async () => {
    const answered: string[] = [];
    for (const route of await pageRoutes())
      answered.push(`${route.operationId} ${await statusOf(route, { authorization: `Bearer ${otherKey}` })}`);
    expect(answered.filter((line) => !line.endsWith(' 404'))).toEqual([]);
  });

  it("answers 404 to another tenant's run-page session on every route of a run or a profile", async () => {
    const answered: string[] = [];
    for (const route of await pageRoutes())
      answered.push(
        `${route.operationId} ${await statusOf(route, {
          cookie: otherSession.cookie,
          'x-csrf-token': otherSession.csrf,
          origin: new URL(base).origin,
        })}`,
      );
    expect(answered.filter((line) => !line.endsWith(' 404'))).toEqual([]);
  });

  it("answers 404 to another tenant's session on the run page and the sign-in page", async () => {
    for (const path of [`/runs/${runId}`, `/profiles/signing/sign-ins/${signInId}`]) {
      const page = await fetch(`${base}${path}`, { headers: { cookie: otherSession.cookie } });
      expect(page.status, path).toBe(404);
      expect(await page.text()).not.toContain(origin);
    }
  });

  // Last: the page and the sign-in are still there for their owner after all of it.
  it('leaves both pages live for their owner', async () => {
    const owner = await sessionOf(fleet.apiKey);
    for (const path of [`/runs/${runId}`, `/profiles/signing/sign-ins/${signInId}`])
      expect((await fetch(`${base}${path}`, { headers: { cookie: owner.cookie } })).status, path).toBe(200);
    // Every GET but one file's: the run downloaded nothing, so no file id of its own exists here.
    const reads = (await pageRoutes()).filter(
      (candidate) => candidate.method === 'GET' && !candidate.path.includes('{file}'),
    );
    for (const route of reads)
      expect(await statusOf(route, { authorization: `Bearer ${fleet.apiKey}` }), route.operationId).toBe(200);
    expect((await call('GET', `/v1/profiles/signing/sign-ins/${signInId}`)).body.status).toBe('open');
    expect((await call('GET', `/v1/runs/${runId}`)).body.status).toBe('parked');
  });
});
