import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** ADR-0130 d2: which limits a run pins, as a user sees them through REST. */
describe('run limits through REST', () => {
  let fleet: FleetHandle;
  const { call } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    fleet = await startTestFleet(uniquePrefix('run-limits'));
    await call('POST', '/v1/profiles', { id: 'lessons', allowed_origins: ['http://127.0.0.1:9'] });
  });
  afterAll(async () => {
    await fleet?.close();
  });

  async function runIn(session: Record<string, unknown>) {
    const created = await call('POST', '/v1/sessions', session);
    expect(created.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${created.body.id}/runs`, {
      input: 'answer',
      script: { steps: [], answer: 'ok' },
    });
    expect(run.status).toBe(201);
    return { session: created.body, run: (await call('GET', `/v1/runs/${run.body.id}`)).body };
  }

  it('gives a run in a bound session on the default agent the browser-task budget, shown as "30"', async () => {
    const { session, run } = await runIn({ browser_profile_id: 'lessons' });
    const agent = await call('GET', `/v1/agents/${session.agent_id}`);
    expect(agent.status).toBe(200);
    expect(run.limits).toMatchObject({ max_steps: 160, max_model_calls: 120, max_tool_calls: 160 });
    expect(run.limits.max_cost_usd).toBe('30');
  });

  it('keeps run_defaults for an unbound session and for a custom agent', async () => {
    const unbound = await runIn({});
    expect(unbound.run.limits).toMatchObject({ max_model_calls: 24, max_cost_usd: null });
    const custom = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'mine' });
    const bound = await runIn({ agent_id: custom.body.id, browser_profile_id: 'lessons' });
    expect(bound.run.limits).toMatchObject({ max_model_calls: 24, max_cost_usd: null });
  });

  it('pins one default agent version for bound and unbound sessions of a tenant', async () => {
    const first = await call('POST', '/v1/sessions', { browser_profile_id: 'lessons' });
    const second = await call('POST', '/v1/sessions', {});
    expect([first.status, second.status]).toEqual([201, 201]);
    expect(second.body.agent_id).toBe(first.body.agent_id);
    expect(second.body.agent_version).toBe(first.body.agent_version);
  });

  it('refuses a chat model that ops/models.yaml does not list', async () => {
    const refused = await call('POST', '/v1/sessions', { model: 'no-such-model' });
    expect(refused.status).toBe(422);
    expect(refused.body.error.code).toBe('validation_failed');
  });
});
