import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, startApiRig } from './api-rig.js';

/**
 * The same Idempotency-Key with a different `timeout_ms` returned the first run (200)
 * instead of 409. The fingerprint now covers the whole validated request.
 */
describe('the idempotency fingerprint covers every field of a run request', { timeout: 30_000 }, () => {
  let rig: ApiRig;
  let key: string;
  let path: string;

  beforeAll(async () => {
    rig = await startApiRig('idempotency');
    key = await rig.key('idem', 'alice', ['admin']);
    const agent = await rig.call('POST', '/v1/agents', {
      key,
      body: { model: 'scripted', instructions: 'i' },
    });
    const session = await rig.call('POST', '/v1/sessions', { key, body: { agent_id: agent.body.id } });
    path = `/v1/sessions/${session.body.id}/runs`;
  });
  afterAll(() => rig?.close());

  const submit = (idempotencyKey: string, body: unknown) =>
    rig.call('POST', path, { key, body, headers: { 'idempotency-key': idempotencyKey } });

  it('answers the first run (200) to an exact duplicate', async () => {
    const body = { input: 'same', timeout_ms: 60_000 };
    const first = await submit('dup-1', body);
    expect(first.status).toBe(201);
    const again = await submit('dup-1', { timeout_ms: 60_000, input: 'same' });
    expect(again.status).toBe(200);
    expect(again.body.id).toBe(first.body.id);
  });

  it('refuses the same key with another timeout_ms: 409 idempotency_conflict', async () => {
    expect((await submit('dup-2', { input: 'same', timeout_ms: 60_000 })).status).toBe(201);
    const other = await submit('dup-2', { input: 'same', timeout_ms: 120_000 });
    expect(other.status).toBe(409);
    expect(other.body.error.code).toBe('idempotency_conflict');
  });

  it('refuses the same key with another script', async () => {
    const script = (answer: string) => ({ steps: [], answer });
    expect((await submit('dup-3', { input: 'same', script: script('a') })).status).toBe(201);
    expect((await submit('dup-3', { input: 'same', script: script('b') })).status).toBe(409);
    expect((await submit('dup-3', { input: 'same' })).status).toBe(409);
  });
});
