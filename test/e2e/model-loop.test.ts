import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FleetHandle } from '../../apps/fleet/fleet.js';
import { startTestFleet } from '../fixtures/fleet.js';
import {
  type ChatRequestBody,
  latestObservation,
  type ModelServer,
  type PolicyReply,
  startModelServer,
} from '../fixtures/model-server.js';
import { SCRIPTED_MODELS_YAML, writeOpsDir } from '../fixtures/ops-dir.js';
import { uniquePrefix } from '../fixtures/redis.js';
import { restClient } from '../fixtures/rest.js';

/** A three-exercise lesson: each Next click shows the next exercise, then Done. */
function startLesson(): Promise<{ server: Server; origin: string }> {
  const server = createServer((_request, response) => {
    response.setHeader('content-type', 'text/html');
    response.end(`<!doctype html><title>Lesson</title><h1 id="h">Exercise 1</h1>
      <button id="next" onclick="const h = document.getElementById('h'); const n = Number(h.textContent.split(' ')[1]);
        if (n >= 3) { h.textContent = 'Done'; this.remove(); } else { h.textContent = 'Exercise ' + (n + 1); }">Next</button>`);
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ server, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }),
    ),
  );
}

/**
 * A rule-based player of the lesson, as a real model would be driven: navigate, then click Next on
 * each observation it is given until the page says Done, then answer.
 */
function lessonPolicy(origin: string, usage: (calls: number) => PolicyReply['usage']) {
  return (body: ChatRequestBody): PolicyReply => {
    const calls = body.messages.filter((message) => message.role === 'assistant').length + 1;
    const page = latestObservation(body);
    if (!page)
      return {
        tool_calls: [{ name: 'browser__navigate', arguments: { url: `${origin}/lesson` } }],
        usage: usage(calls),
      };
    if (page.elements.some((element) => element.role === 'heading' && element.name === 'Done'))
      return { content: 'Lesson complete.', usage: usage(calls) };
    const next = page.elements.find((element) => element.role === 'button' && element.name === 'Next');
    if (!next) return { content: 'I cannot find the Next button.', usage: usage(calls) };
    return {
      tool_calls: [
        {
          name: 'browser__act',
          arguments: {
            revision: page.revision,
            element: next.ref,
            action: 'click',
            postcondition: { role: 'heading', name: 'Done', wait_ms: 300 },
          },
        },
      ],
      usage: usage(calls),
    };
  };
}

describe('a bound run driven by a real-model-shaped server over HTTP (ADR-0130)', () => {
  let fleet: FleetHandle;
  let lesson: Awaited<ReturnType<typeof startLesson>>;
  let model: ModelServer;
  let opsDir: string;
  /** Usage per call, by the run's input: the lesson is cheap, the costly run crosses USD 30. */
  const usageFor = new Map<string, (calls: number) => PolicyReply['usage']>();
  const { call, waitForStatus } = restClient(
    () => fleet.urls.api,
    () => fleet.apiKey,
  );

  beforeAll(async () => {
    lesson = await startLesson();
    model = await startModelServer({
      policy: (body) => {
        const input = String(body.messages.find((message) => message.role === 'user')?.content ?? '');
        return lessonPolicy(lesson.origin, usageFor.get(input) ?? (() => undefined))(body);
      },
    });
    opsDir = writeOpsDir(`${SCRIPTED_MODELS_YAML}
  tutor:
    provider: openai-compatible
    base_url: ${model.baseUrl}
    api_key_env: TUTOR_API_KEY
    input_usd_per_mtok: "10"
    cached_input_usd_per_mtok: "1"
    output_usd_per_mtok: "40"
    context_window_tokens: 272000
    max_output_tokens: 1024
`);
    fleet = await startTestFleet(uniquePrefix('model-loop'), {
      LEASEHOLD_OPS_DIR: opsDir,
      TUTOR_API_KEY: model.apiKey,
    });
    await call('POST', '/v1/profiles', { id: 'school', allowed_origins: [lesson.origin] });
  });

  afterAll(async () => {
    await fleet?.close();
    await model?.close();
    await new Promise((resolve) => lesson?.server.close(resolve));
    if (opsDir) rmSync(opsDir, { recursive: true, force: true });
  });

  async function boundRun(input: string) {
    const session = await call('POST', '/v1/sessions', { browser_profile_id: 'school', model: 'tutor' });
    expect(session.status).toBe(201);
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, { input });
    expect(run.status).toBe(201);
    return run.body.id as string;
  }

  it('works a lesson page to its end on one approval, with the origins row and the browser tools first', async () => {
    usageFor.set('Do the lesson', () => ({
      prompt_tokens: 2_000,
      completion_tokens: 100,
      cached_tokens: 1_000,
    }));
    const runId = await boundRun('Do the lesson');
    const parked = await waitForStatus(runId, ['parked', 'failed', 'succeeded']);
    expect(parked.status).toBe('parked');
    expect(parked.limits.max_cost_usd).toBe('30');
    const approved = await call('POST', `/v1/approvals/${parked.pending_approvals[0].id}/approve`, {
      grant: { duration_ms: 600_000, max_actions: 10 },
    });
    expect(approved.status).toBe(200);
    const done = await waitForStatus(runId, ['succeeded', 'failed']);
    expect(done).toMatchObject({ status: 'succeeded', result: { answer: 'Lesson complete.' } });
    // navigate, three clicks, the answer; each call priced: 1,000 uncached + 1,000 cached input, 100 output.
    expect(done.usage).toMatchObject({ model_calls: 5, tool_calls: 4, cost_micro_usd: 5 * 15_000 });

    const lessonRequests = model.requests.filter((request) =>
      request.body.messages.some((message) => message.role === 'user' && message.content === 'Do the lesson'),
    );
    const first = lessonRequests[0]?.body;
    expect(first?.tools?.slice(0, 3).map((tool) => tool.function.name)).toEqual([
      'browser__navigate',
      'browser__observe',
      'browser__act',
    ]);
    const row = first?.messages.at(-1);
    expect(row).toMatchObject({ role: 'system', content: `browser_origins=${lesson.origin}` });
    expect(String(row?.content)).not.toContain('school');
  });

  it('names no origins and defines no browser tools for an unbound run, and keeps run_defaults', async () => {
    usageFor.set('Just answer', () => ({ prompt_tokens: 10, completion_tokens: 1 }));
    const session = await call('POST', '/v1/sessions', { model: 'tutor' });
    const run = await call('POST', `/v1/sessions/${session.body.id}/runs`, { input: 'Just answer' });
    const done = await waitForStatus(run.body.id, ['succeeded', 'failed']);
    // The policy navigates first; an unbound run has no such tool and the model is told so.
    expect(done.limits).toMatchObject({ max_model_calls: 24, max_cost_usd: null });
    const requests = model.requests.filter((request) =>
      request.body.messages.some((message) => message.role === 'user' && message.content === 'Just answer'),
    );
    expect(requests.length).toBeGreaterThan(0);
    for (const request of requests) {
      expect(JSON.stringify(request.body.messages)).not.toContain('browser_origins');
      expect((request.body.tools ?? []).map((tool) => tool.function.name)).not.toContain('browser__navigate');
    }
  });

  it("shows each model's worst-case call", async () => {
    const models = await call('GET', '/v1/models');
    expect(models.body.models.find((entry: { name: string }) => entry.name === 'tutor')).toMatchObject({
      // 272,000 input tokens at USD 10 and its 1,024-token output cap at USD 40 per million.
      worst_case_call_usd: '2.76096',
    });
  });

  it('stops a run with budget_exceeded after the one call that crosses USD 30', async () => {
    // USD 15 for the first call, USD 20 for the second: 35 spent, past the limit by that one call.
    usageFor.set('Spend it', (calls) => ({
      prompt_tokens: calls === 1 ? 1_500_000 : 2_000_000,
      completion_tokens: 0,
    }));
    const runId = await boundRun('Spend it');
    const ended = await waitForStatus(runId, ['failed', 'succeeded', 'parked']);
    expect(ended).toMatchObject({ status: 'failed', error: { code: 'budget_exceeded' } });
    expect(ended.usage).toMatchObject({ model_calls: 2, cost_micro_usd: 35_000_000 });
    const spentRequests = model.requests.filter((request) =>
      request.body.messages.some((message) => message.role === 'user' && message.content === 'Spend it'),
    );
    expect(spentRequests).toHaveLength(2);
  });
});
