import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { EventStreamReader } from '../fixtures/event-stream.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/**
 * The tenant's event stream, `GET /v1/events`: the status events of every run of the key's tenant
 * as they happen, none of another tenant's, each stream counted with the key's run streams.
 */
describe('the tenant event stream', { timeout: 90_000 }, () => {
  let fleet: FleetHandle;
  let otherKey: string;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );
  const base = () => fleet.urls.api.replace(/\/v1$/, '');
  const open = async (key: string) => {
    const reader = await EventStreamReader.open(`${base()}/v1/events`, { authorization: `Bearer ${key}` });
    if (reader.status === 200) await reader.next((event) => event.event === 'ready');
    return reader;
  };
  const readers: EventStreamReader[] = [];

  beforeAll(async () => {
    fleet = await startTestFleet(uniquePrefix('tenant-events'), { EVENT_STREAMS_PER_KEY: '2' });
    ({ key: otherKey } = await fleet.store.createApiKey({
      tenant: 'other',
      principal: 'olga',
      scopes: ['runs:read', 'runs:write'],
    }));
  });
  afterAll(async () => {
    for (const reader of readers) reader.close();
    await fleet?.close();
  });

  /** A scripted run without a page, submitted with `key`: it ends at once with `answer`. */
  async function submit(key: string, answer: string): Promise<string> {
    const agent = await call('POST', '/v1/agents', { model: 'scripted', instructions: '' }, { key });
    const session = await call('POST', '/v1/sessions', { agent_id: agent.body.id }, { key });
    const run = await call(
      'POST',
      `/v1/sessions/${session.body.id}/runs`,
      { input: `Say ${answer}`, script: { steps: [], answer } },
      { key },
    );
    expect(run.status).toBe(201);
    return run.body.id;
  }

  it("sends each status event of the tenant's runs with the run's id, and never another tenant's", async () => {
    const ours = await open(fleet.apiKey);
    const theirs = await open(otherKey);
    readers.push(ours, theirs);
    expect(ours.contentType).toContain('text/event-stream');

    const runId = await submit(fleet.apiKey, 'hi');
    const submitted = await ours.next((event) => event.data.run_id === runId);
    expect(submitted).toMatchObject({
      event: 'run.submitted',
      data: { run_id: runId, type: 'run.submitted', data: { status: 'queued' } },
    });
    expect(submitted.data.id).toMatch(/^\d+-\d+$/);
    const ended = await ours.next((event) => event.data.run_id === runId && event.event === 'run.succeeded');
    expect(ended.data.data.status).toBe('succeeded');
    const types = ours.seen.filter((event) => event.data.run_id === runId).map((event) => event.event);
    expect(types).toEqual(['run.submitted', 'run.claimed', 'run.succeeded']);
    await waitForStatus(runId, ['succeeded']);

    // The other tenant's stream hears its own run, after ours ended, and nothing of ours.
    const theirRun = await submit(otherKey, 'ho');
    await theirs.next((event) => event.data.run_id === theirRun && event.event === 'run.succeeded');
    expect(theirs.seen.some((event) => event.data.run_id === runId)).toBe(false);
    expect(ours.seen.some((event) => event.data.run_id === theirRun)).toBe(false);
  });

  it("counts under the key's limit of open streams, with its run streams", async () => {
    const first = await open(otherKey);
    readers.push(first);
    // The other key now holds two (one from the test before): a third is refused, tenant or run.
    const refused = await EventStreamReader.open(`${base()}/v1/events`, {
      authorization: `Bearer ${otherKey}`,
    });
    expect(refused.status).toBe(429);
    const other = await submit(otherKey, 'again');
    const runEvents = await fetch(`${base()}/v1/runs/${other}/events`, {
      headers: { authorization: `Bearer ${otherKey}` },
    });
    expect(runEvents.status).toBe(429);
    expect((await runEvents.json()).error.code).toBe('rate_limited');

    // Closing one frees its slot.
    first.close();
    await expect
      .poll(async () => {
        const again = await open(otherKey);
        readers.push(again);
        return again.status;
      })
      .toBe(200);
  });
});
