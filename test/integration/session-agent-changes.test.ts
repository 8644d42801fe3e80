import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ApiHandle } from '../../apps/api/server.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { startTestApi } from '../fixtures/api.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import type { RestAnswer } from '../fixtures/rest.js';

/**
 * What is created can be changed (REST, real Redis, no workers): an agent changed into a new version
 * while its sessions keep theirs, the reserved browser-task budget refused, and a session deleted
 * only once its runs have ended.
 */
describe('changing agents and deleting sessions over REST', () => {
  const prefix = uniquePrefix('session-agent-changes');
  let api: ApiHandle;
  let admin: string;
  let stranger: string;

  beforeAll(async () => {
    api = await startTestApi(prefix);
    admin = (await api.store.createApiKey({ tenant: 'ca', principal: 'root', scopes: ['admin'] })).key;
    stranger = (await api.store.createApiKey({ tenant: 'cb', principal: 'root', scopes: ['admin'] })).key;
  });
  afterAll(async () => {
    await api.close();
    const redis = await connectRedis(testRedisUrl(), 'producer', 'test-session-agent-changes-cleanup');
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  async function call(method: string, path: string, body?: unknown, key = admin): Promise<RestAnswer> {
    const answer = await fetch(`${api.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      ...(body ? { body: JSON.stringify(body) } : {}),
    });
    const text = await answer.text();
    return { status: answer.status, body: text ? JSON.parse(text) : undefined };
  }

  it('changes an agent into a new version; a session made before keeps the version it pinned', async () => {
    const created = await call('POST', '/v1/agents', {
      model: 'scripted',
      instructions: 'First.',
      metadata: { team: 'ops', note: 'old' },
    });
    expect(created.status).toBe(201);
    const agentId = created.body.id as string;
    const before = await call('POST', '/v1/sessions', { agent_id: agentId });

    const changed = await call('PATCH', `/v1/agents/${agentId}`, {
      instructions: 'Second.',
      metadata: { note: null, owner: 'ana' },
    });
    expect(changed.status).toBe(200);
    expect(changed.body.version).not.toBe(created.body.version);
    expect((await call('GET', `/v1/agents/${agentId}`)).body.latest_version).toBe(changed.body.version);
    const definition = await api.store.getAgentVersion('ca', agentId, changed.body.version);
    expect(definition).toMatchObject({
      model: 'scripted',
      instructions: 'Second.',
      metadata: { team: 'ops', owner: 'ana' },
    });
    expect(definition?.metadata).not.toHaveProperty('note');

    expect((await call('GET', `/v1/sessions/${before.body.id}`)).body.agent_version).toBe(
      created.body.version,
    );
    const after = await call('POST', '/v1/sessions', { agent_id: agentId });
    expect(after.body.agent_version).toBe(changed.body.version);

    expect((await call('PATCH', `/v1/agents/${agentId}`, {})).status).toBe(422);
    expect((await call('PATCH', `/v1/agents/${agentId}`, { instructions: 'x' }, stranger)).status).toBe(404);
  });

  it('refuses browser_task_limits in metadata, which the deployment alone sets (ADR-0130 d2)', async () => {
    const reserved = { metadata: { browser_task_limits: { max_steps: 999 } } };
    const created = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'x', ...reserved });
    expect(created.status).toBe(422);
    expect(created.body.error.message).toMatch(/browser_task_limits/);
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'x' });
    const patched = await call('PATCH', `/v1/agents/${agent.body.id}`, reserved);
    expect(patched.status).toBe(422);
    const put = await call('PUT', `/v1/agents/${agent.body.id}`, {
      model: 'scripted',
      instructions: 'x',
      ...reserved,
    });
    expect(put.status).toBe(422);
    expect((await call('GET', `/v1/agents/${agent.body.id}`)).body.latest_version).toBe(agent.body.version);
  });

  it('deletes a session once no run of it is active, naming the one that is', async () => {
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: 'x' });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id });
    const sessionId = session.body.id as string;
    const run = await call('POST', `/v1/sessions/${sessionId}/runs`, {
      input: 'wait',
      script: { steps: [], answer: 'ok' },
    });
    expect(run.status).toBe(201);

    expect((await call('DELETE', `/v1/sessions/${sessionId}`, undefined, stranger)).status).toBe(404);
    const refused = await call('DELETE', `/v1/sessions/${sessionId}`);
    expect(refused.status).toBe(409);
    expect(refused.body.error.message).toContain(run.body.id);

    expect((await call('POST', `/v1/runs/${run.body.id}/cancel`)).body.status).toBe('cancelled');
    expect((await call('DELETE', `/v1/sessions/${sessionId}`)).status).toBe(204);
    expect((await call('GET', `/v1/sessions/${sessionId}`)).status).toBe(404);
    expect((await call('POST', `/v1/sessions/${sessionId}/runs`, { input: 'again' })).status).toBe(404);
    // Its runs stay readable until their retention ends.
    expect((await call('GET', `/v1/runs/${run.body.id}`)).body.status).toBe('cancelled');
  });
});
