import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ApiRig, startApiRig } from '../security/api-rig.js';

/**
 * One lifecycle: the API's cancel goes through the run lifecycle, so an end it causes
 * is counted once where it was caused (`leasehold_runs_ended_total`), as the worker's and the
 * sweeper's are. The API runs alone: a submitted run stays queued until it is cancelled.
 */
describe('the API ends runs through the run lifecycle', { timeout: 30_000 }, () => {
  let rig: ApiRig;
  let key: string;

  beforeAll(async () => {
    rig = await startApiRig('api-lifecycle');
    key = await rig.key('acme', 'ada', ['admin', 'runs:read', 'runs:write']);
  });
  afterAll(() => rig?.close());

  async function queuedRun(): Promise<string> {
    const agent = await rig.call('POST', '/v1/agents', {
      key,
      body: { model: 'scripted', instructions: 'Answer.' },
    });
    const session = await rig.call('POST', '/v1/sessions', { key, body: { agent_id: agent.body.id } });
    const run = await rig.call('POST', `/v1/sessions/${session.body.id}/runs`, {
      key,
      body: { input: 'hello', script: { steps: [], answer: 'hi' } },
    });
    expect(run).toMatchObject({ status: 201, body: { status: 'queued' } });
    return run.body.id;
  }

  async function cancelledCount(): Promise<number> {
    const text = (await rig.call('GET', '/metrics')).body as string;
    const line = text
      .split('\n')
      .find((row) => row.startsWith('leasehold_runs_ended_total{status="cancelled"'));
    return line ? Number(line.split(' ').at(-1)) : 0;
  }

  it('counts a queued run cancelled through the API in leasehold_runs_ended_total{status="cancelled"}', async () => {
    const runId = await queuedRun();
    expect(await cancelledCount()).toBe(0);

    const cancelled = await rig.call('POST', `/v1/runs/${runId}/cancel`, { key });
    expect(cancelled).toMatchObject({ status: 200, body: { id: runId, status: 'cancelled' } });
    expect(await cancelledCount()).toBe(1);

    // A second cancel of the ended run is refused and counts nothing more.
    expect((await rig.call('POST', `/v1/runs/${runId}/cancel`, { key })).status).toBe(409);
    expect(await cancelledCount()).toBe(1);
  });
});
