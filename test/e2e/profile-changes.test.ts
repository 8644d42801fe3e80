import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { eventually } from '../fixtures/eventually.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const ENDED = ['succeeded', 'failed', 'cancelled'];

/** A page of its own at a port of its own: an origin apart. */
async function startSite(title: string): Promise<{ server: Server; origin: string }> {
  const server = createServer((_request, response) => {
    response.setHeader('content-type', 'text/html');
    response.end(`<!doctype html><title>${title}</title><h1>${title}</h1><button>Buy</button>`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/**
 * What is created can be changed: a profile's origins changed over REST are the ones the next run
 * may visit (a warm context made before the change is not handed over), a profile a run holds is
 * not deleted, and only its tenant's admin or principal changes it — on a real fleet and Chromium.
 */
describe('changing and deleting a profile over REST', { timeout: 120_000 }, () => {
  let fleet: FleetHandle;
  let before: { server: Server; origin: string };
  let after: { server: Server; origin: string };
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    [before, after] = await Promise.all([startSite('Before'), startSite('After')]);
    // A warm context per profile: one made with the old origins must not serve a run after the change.
    fleet = await startTestFleet(uniquePrefix('profile-changes'), { BROWSER_WARM_CONTEXTS: '1' });
  });
  afterAll(async () => {
    await fleet?.close();
    for (const site of [before, after]) await new Promise((resolve) => site?.server.close(resolve));
  });

  async function session(profileId: string): Promise<string> {
    const agent = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'Go.',
      tools: ['browser.navigate', 'browser.observe', 'browser.act'],
    });
    const created = await call('POST', '/v1/sessions', {
      agent_id: agent.body.id,
      browser_profile_id: profileId,
    });
    expect(created.status).toBe(201);
    return created.body.id;
  }
  async function navigate(sessionId: string, url: string) {
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: `go to ${url}`,
      script: { steps: [{ tool: 'browser.navigate', url }], answer: 'there' },
    });
    expect(submitted.status).toBe(201);
    return waitForStatus(submitted.body.id, ENDED, 60_000);
  }

  it("runs after a change of the profile's origins go where the change says", async () => {
    expect(
      (await call('POST', '/v1/profiles', { id: 'moving', allowed_origins: [before.origin] })).status,
    ).toBe(201);
    const sessionId = await session('moving');
    expect(await navigate(sessionId, `${before.origin}/`)).toMatchObject({ status: 'succeeded' });
    // A context warmed with the origins before the change is ready when the change comes.
    const warm = fleet.roles.browserWorker.warmPool;
    await eventually(
      async () => warm?.size({ tenant: 'dev', id: 'moving' }) ?? 0,
      (ready) => ready >= 1,
      30_000,
      100,
    );

    const changed = await call('PATCH', '/v1/profiles/moving', { allowed_origins: [`${after.origin}/`] });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ id: 'moving', allowed_origins: [after.origin] });
    expect((await call('GET', '/v1/profiles/moving')).body.allowed_origins).toEqual([after.origin]);

    expect(await navigate(sessionId, `${after.origin}/`)).toMatchObject({ status: 'succeeded' });
    expect(await navigate(sessionId, `${before.origin}/`)).toMatchObject({
      status: 'failed',
      error: { code: 'url_disallowed' },
    });
  });

  it('refuses origins the address guard refuses, as at creation', async () => {
    await call('POST', '/v1/profiles', { id: 'guarded', allowed_origins: [before.origin] });
    const refused = await call('PATCH', '/v1/profiles/guarded', {
      allowed_origins: ['http://169.254.169.254'],
    });
    expect(refused.status).toBe(422);
    expect(refused.body.error.message).toMatch(/allowed_origins\[0\]/);
    const unknown = await call('PATCH', '/v1/profiles/guarded', { id: 'renamed' });
    expect(unknown.status).toBe(422);
    expect((await call('GET', '/v1/profiles/guarded')).body.allowed_origins).toEqual([before.origin]);
  });

  it('refuses to delete a profile while a run holds it, naming the run; deletes it after', async () => {
    await call('POST', '/v1/profiles', { id: 'held', allowed_origins: [before.origin] });
    const sessionId = await session('held');
    const submitted = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'buy',
      script: {
        steps: [
          { tool: 'browser.navigate', url: `${before.origin}/` },
          { tool: 'browser.act', target: { role: 'button', name: 'Buy' }, action: 'click' },
        ],
        answer: 'bought',
      },
    });
    const runId = submitted.body.id as string;
    // Parked on the click's approval, the run still holds the profile's page.
    expect(await waitForStatus(runId, ['parked', ...ENDED], 60_000)).toMatchObject({ status: 'parked' });

    const refused = await call('DELETE', '/v1/profiles/held');
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain(runId);
    expect((await call('GET', '/v1/profiles/held')).status).toBe(200);

    expect((await call('POST', `/v1/runs/${runId}/cancel`)).status).toBeLessThan(300);
    await waitForStatus(runId, ENDED, 60_000);
    // The lease is released after the end: the delete is let in once nothing holds the profile.
    let deleted = await call('DELETE', '/v1/profiles/held');
    for (let tries = 0; deleted.status === 409 && tries < 100; tries += 1) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      deleted = await call('DELETE', '/v1/profiles/held');
    }
    expect(deleted.status).toBe(204);
    expect((await call('GET', '/v1/profiles/held')).status).toBe(404);
    expect((await call('GET', '/v1/profiles')).body.profiles.map((p: { id: string }) => p.id)).not.toContain(
      'held',
    );
    // Made again under the same id, it starts with no sealed state.
    expect(
      (await call('POST', '/v1/profiles', { id: 'held', allowed_origins: [after.origin] })).body,
    ).toMatchObject({
      sealed: false,
    });
  });

  it("answers another tenant's profile 404 and another principal's key 403", async () => {
    await call('POST', '/v1/profiles', { id: 'owned', allowed_origins: [before.origin] });
    const stranger = await fleet.store.createApiKey({
      tenant: 'elsewhere',
      principal: 'someone',
      scopes: ['admin'],
    });
    const colleague = await fleet.store.createApiKey({
      tenant: 'dev',
      principal: 'colleague',
      scopes: ['runs:read', 'runs:write'],
    });
    const change = { allowed_origins: [after.origin] };
    expect((await call('PATCH', '/v1/profiles/owned', change, { key: stranger.key })).status).toBe(404);
    expect((await call('DELETE', '/v1/profiles/owned', undefined, { key: stranger.key })).status).toBe(404);
    expect((await call('PATCH', '/v1/profiles/owned', change, { key: colleague.key })).status).toBe(403);
    expect((await call('DELETE', '/v1/profiles/owned', undefined, { key: colleague.key })).status).toBe(403);
    expect((await call('GET', '/v1/profiles/owned')).body.allowed_origins).toEqual([before.origin]);
  });
});
