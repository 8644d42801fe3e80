import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SweeperHandle } from '../../apps/sweeper/sweeper.js';
import { startTestSweeper } from '../fixtures/sweeper.js';
import { type ApiRig, nestedJson, startApiRig } from './api-rig.js';

/**
 * JSON nested ~2,000 levels (well under the 64 KiB body limit) gave 500 on
 * `POST /v1/agents` and on run submission, and the run record was written `queued` before the
 * failure: GET/cancel/events on it answered 500 forever and the sweeper logged a stack for it
 * every pass. Free-form JSON is now bounded by the schema (32 levels, a size per field) before
 * anything is written, and a stored record that cannot be read answers a stable code.
 */
describe('bounded JSON input, checked before any write', { timeout: 30_000 }, () => {
  let rig: ApiRig;
  let admin: string;
  let sessionId: string;

  beforeAll(async () => {
    rig = await startApiRig('bounded-input');
    admin = await rig.key('bounded', 'ops', ['admin']);
    const agent = await rig.call('POST', '/v1/agents', {
      key: admin,
      body: { model: 'scripted', instructions: 'bounded' },
    });
    expect(agent.status).toBe(201);
    const session = await rig.call('POST', '/v1/sessions', { key: admin, body: { agent_id: agent.body.id } });
    expect(session.status).toBe(201);
    sessionId = session.body.id;
  });
  afterAll(() => rig?.close());

  it('refuses agent metadata nested 2,000 levels deep with 422 and writes no agent', async () => {
    const before = await rig.storedKeys();
    const raw = `{"model":"scripted","instructions":"deep","metadata":{"a":${nestedJson(2_000)}}}`;
    expect(raw.length).toBeLessThan(64 * 1024);
    const answer = await rig.call('POST', '/v1/agents', { key: admin, raw });
    expect(answer.status).toBe(422);
    expect(answer.body.error.code).toBe('validation_failed');
    expect(answer.body.error.message).toMatch(/metadata.*32 levels/);
    expect(await rig.storedKeys()).toEqual(before);
  });

  it('takes metadata nested exactly 32 levels and refuses 33', async () => {
    // `{"a": …}` is one level, so 31 arrays inside it make 32.
    const at = await rig.call('POST', '/v1/agents', {
      key: admin,
      raw: `{"model":"scripted","instructions":"at","metadata":{"a":${nestedJson(31)}}}`,
    });
    expect(at.status).toBe(201);
    const over = await rig.call('POST', '/v1/agents', {
      key: admin,
      raw: `{"model":"scripted","instructions":"over","metadata":{"a":${nestedJson(32)}}}`,
    });
    expect(over.status).toBe(422);
  });

  it('refuses metadata over its size limit although the body is under 64 KiB', async () => {
    const before = await rig.storedKeys();
    const answer = await rig.call('POST', '/v1/agents', {
      key: admin,
      body: { model: 'scripted', instructions: 'big', metadata: { blob: 'x'.repeat(40_000) } },
    });
    expect(answer.status).toBe(422);
    expect(answer.body.error.message).toMatch(/metadata.*bytes/);
    expect(await rig.storedKeys()).toEqual(before);
  });

  it("refuses a delegate step's script nested 2,000 levels deep with 422 and writes no run", async () => {
    const before = await rig.storedKeys();
    const raw = `{"input":"deep","script":{"steps":[{"tool":"agent.delegate","input":"child","script":${nestedJson(2_000)}}],"answer":"done"}}`;
    const answer = await rig.call('POST', `/v1/sessions/${sessionId}/runs`, { key: admin, raw });
    expect(answer.status).toBe(422);
    expect(answer.body.error.code).toBe('validation_failed');
    expect(await rig.storedKeys()).toEqual(before);
  });

  it('refuses a run whose derived request fails before the store write (no record, no index entry)', async () => {
    // A script of many small steps: each field is within its own bound, the whole script is not.
    const before = await rig.storedKeys();
    const steps = Array.from({ length: 900 }, () => ({
      tool: 'browser.navigate',
      url: 'https://a.example/',
    }));
    const answer = await rig.call('POST', `/v1/sessions/${sessionId}/runs`, {
      key: admin,
      body: { input: 'many', script: { steps, answer: 'done' } },
    });
    expect(answer.status).toBe(422);
    expect(await rig.storedKeys()).toEqual(before);
  });

  it('answers GET, cancel and events on a stored run it cannot read with 409 record_unreadable, not 500', async () => {
    const created = await rig.call('POST', `/v1/sessions/${sessionId}/runs`, {
      key: admin,
      body: { input: 'to be spoiled' },
    });
    expect(created.status).toBe(201);
    const runId: string = created.body.id;
    // A record as the old code could store it: an input nested far past what the reader takes.
    await rig.redis.hset(`${rig.prefix}:{run:${runId}}:run`, 'input', nestedJson(5_000));

    for (const [method, path] of [
      ['GET', `/v1/runs/${runId}`],
      ['POST', `/v1/runs/${runId}/cancel`],
      ['GET', `/v1/runs/${runId}/events`],
    ] as const) {
      const answer = await rig.call(method, path, { key: admin });
      expect(answer.status, `${method} ${path}`).toBe(409);
      expect(answer.body.error.code).toBe('record_unreadable');
      expect(answer.body.error.message).toContain(runId);
      expect(answer.body.error.message).not.toMatch(/\n\s+at /);
    }
    // Another tenant still learns nothing about it.
    const other = await rig.key('bounded-other', 'eve', ['admin']);
    expect((await rig.call('GET', `/v1/runs/${runId}`, { key: other })).status).toBe(404);
  });
});

describe('the sweeper and a stored record it cannot read', { timeout: 30_000 }, () => {
  let rig: ApiRig;
  let sweeper: SweeperHandle | undefined;

  beforeAll(async () => {
    rig = await startApiRig('bounded-sweeper');
  });
  afterAll(async () => {
    await sweeper?.close();
    await rig?.close();
  });

  it('logs an unreadable run once, without a stack, and keeps sweeping the others', async () => {
    const admin = await rig.key('sweep', 'ops', ['admin']);
    const agent = await rig.call('POST', '/v1/agents', {
      key: admin,
      body: { model: 'scripted', instructions: 's' },
    });
    const session = await rig.call('POST', '/v1/sessions', { key: admin, body: { agent_id: agent.body.id } });
    const submit = async (timeoutMs: number) =>
      (
        await rig.call('POST', `/v1/sessions/${session.body.id}/runs`, {
          key: admin,
          body: { input: 'sweep me', timeout_ms: timeoutMs },
        })
      ).body.id as string;
    const spoiled = await submit(1_000);
    const healthy = await submit(1_000);
    await rig.redis.hset(`${rig.prefix}:{run:${spoiled}}:run`, 'input', nestedJson(5_000));

    const lines: Array<Record<string, unknown>> = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    sweeper = await startTestSweeper(rig.prefix, { logger, intervalMs: 100 });
    const running = sweeper;
    const told = () => lines.filter((line) => JSON.stringify(line).includes(spoiled));
    // The healthy run past its deadline is failed as usual, and the spoiled one told of.
    await expect
      .poll(async () => (await rig.call('GET', `/v1/runs/${healthy}`, { key: admin })).body.status, {
        timeout: 15_000,
      })
      .toBe('failed');
    await expect.poll(() => told().length, { timeout: 15_000 }).toBeGreaterThan(0);
    // Ten passes more, each of which meets the spoiled run again: still the one line.
    const passes = running.task.passes;
    await expect.poll(() => running.task.passes, { timeout: 15_000 }).toBeGreaterThanOrEqual(passes + 10);

    const aboutSpoiled = told();
    expect(aboutSpoiled).toHaveLength(1);
    expect(JSON.stringify(aboutSpoiled[0])).not.toMatch(/\\n\s+at /);
    expect(aboutSpoiled[0]?.msg).toMatch(/cannot be read/);
  });
});
