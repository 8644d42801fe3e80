import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import { type ChatRequestBody, type ModelServer, startModelServer } from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

const PRODUCT = {
  type: 'object',
  properties: { title: { type: 'string' }, price: { type: 'number', minimum: 0 } },
  required: ['title', 'price'],
  additionalProperties: false,
};

/** The run's input text, which picks the played model's answers: one per call, in order. */
const answersFor = new Map<string, string[]>();

function userInput(body: ChatRequestBody): string {
  return String(body.messages.find((message) => message.role === 'user')?.content ?? '');
}

describe('results a program can read: output_schema (through the API, a fleet and a model server)', () => {
  let fleet: FleetHandle;
  let model: ModelServer;
  let opsDir: string;
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    model = await startModelServer({
      policy: (body) => {
        const answers = answersFor.get(userInput(body)) ?? ['{}'];
        const turn = body.messages.filter((message) => message.role === 'assistant').length;
        return { content: answers[Math.min(turn, answers.length - 1)] ?? '{}' };
      },
    });
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  reader:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: READER_API_KEY
    input_usd_per_mtok: "0"
    cached_input_usd_per_mtok: "0"
    output_usd_per_mtok: "0"
    context_window_tokens: 32000
`);
    fleet = await startTestFleet(uniquePrefix('output-schema'), {
      LEASEHOLD_OPS_DIR: opsDir,
      READER_API_KEY: model.apiKey,
    });
  });

  afterAll(async () => {
    await fleet?.close();
    await model?.close();
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
  });

  async function modelRun(input: string, answers: string[], outputSchema: unknown = PRODUCT) {
    answersFor.set(input, answers);
    const session = await call('POST', '/v1/sessions', { model: 'reader' });
    expect(session.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input,
      output_schema: outputSchema,
    });
    expect(run.status).toBe(201);
    return waitForStatus(run.body.id, ['succeeded', 'failed']);
  }

  function requestsOf(input: string) {
    return model.requests.filter((request) => userInput(request.body) === input);
  }

  it('finishes a model run with the validated object in result.output, the schema sent as response_format', async () => {
    const done = await modelRun('Read the lamp', ['{"title":"Lamp","price":12.5}']);
    expect(done).toMatchObject({
      status: 'succeeded',
      result: { answer: '{"title":"Lamp","price":12.5}', output: { title: 'Lamp', price: 12.5 } },
      usage: { model_calls: 1 },
    });
    expect(requestsOf('Read the lamp')[0]?.body.response_format).toEqual({
      type: 'json_schema',
      json_schema: { name: 'output', schema: PRODUCT, strict: false },
    });
  });

  it("gives an invalid answer one correction turn with the validator's errors, then ends invalid_output", async () => {
    const done = await modelRun('Read the chair', ['{"title":"Chair"}', '{"title":"Chair","price":-1}']);
    expect(done).toMatchObject({
      status: 'failed',
      error: { code: 'invalid_output' },
      usage: { model_calls: 2 },
    });
    expect(done.error.message).toContain('/price must be >= 0');
    const [, correction] = requestsOf('Read the chair');
    const told = correction?.body.messages.at(-1);
    expect(told).toMatchObject({ role: 'user' });
    expect(String(told?.content)).toContain("must have required property 'price'");
    // The correction turn may only answer.
    expect(correction?.body.tools ?? []).toEqual([]);
  });

  it('takes the corrected answer when the correction turn gets it right', async () => {
    const done = await modelRun('Read the desk', ['The desk costs 80.', '{"title":"Desk","price":80}']);
    expect(done).toMatchObject({ status: 'succeeded', result: { output: { title: 'Desk', price: 80 } } });
  });

  it("applies the session's output_schema to its runs", async () => {
    answersFor.set('Read the bed', ['{"title":"Bed"}', '{"title":"Bed"}']);
    const session = await call('POST', '/v1/sessions', { model: 'reader', output_schema: PRODUCT });
    expect(session.body.output_schema).toEqual(PRODUCT);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, { input: 'Read the bed' });
    expect(run.body.input.output_schema).toEqual(PRODUCT);
    const done = await waitForStatus(run.body.id, ['succeeded', 'failed']);
    expect(done).toMatchObject({ status: 'failed', error: { code: 'invalid_output' } });
  });

  it("finishes a scripted run with its script's final value, validated the same way", async () => {
    const session = await call('POST', '/v1/sessions', {});
    const valid = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Give the value',
      output_schema: PRODUCT,
      script: { steps: [], output: { title: 'Lamp', price: 1 } },
    });
    expect(await waitForStatus(valid.body.id, ['succeeded', 'failed'])).toMatchObject({
      status: 'succeeded',
      result: { output: { title: 'Lamp', price: 1 } },
    });
    const invalid = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
      input: 'Give the wrong value',
      output_schema: PRODUCT,
      script: { steps: [], output: { title: 'Lamp' } },
    });
    expect(await waitForStatus(invalid.body.id, ['succeeded', 'failed'])).toMatchObject({
      status: 'failed',
      error: { code: 'invalid_output' },
      usage: { model_calls: 2 },
    });
  });

  it('refuses a schema too deep, too large or outside the subset with 422 at submission', async () => {
    const session = await call('POST', '/v1/sessions', { model: 'reader' });
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < 20; level += 1) deep = { type: 'object', properties: { a: deep } };
    for (const schema of [
      deep,
      { type: 'object', description: 'x'.repeat(20_000) },
      { type: 'object', required: 'title' },
    ]) {
      const refused = await call('POST', `/v1/sessions/${session.body.id}/runs`, {
        input: 'Never runs',
        output_schema: schema,
      });
      expect(refused.status).toBe(422);
      expect(refused.body.error.code).toBe('validation_failed');
    }
    const refusedSession = await call('POST', '/v1/sessions', { output_schema: deep });
    expect(refusedSession.status).toBe(422);
  });
});
