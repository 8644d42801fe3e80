import { describe, expect, it } from 'vitest';
import { OUTPUT_SCHEMA_BOUNDS, outputSchemaProblem } from '../../libs/contracts/index.js';
import {
  type Model,
  type ModelRequest,
  type ModelResponse,
  type RunLimits,
  runExecution,
  type ToolExecutor,
} from '../../libs/runtime/index.js';
import { outputOption } from '../../libs/runtime/output-check.js';
import { MemoryRun, TEST_LOOP_LIMITS } from '../fixtures/memory-run.js';

const SCHEMA = {
  type: 'object',
  properties: { title: { type: 'string' }, price: { type: 'number' } },
  required: ['title', 'price'],
  additionalProperties: false,
};

/** Answers each call with the next of its answers (the last one again once they run out). */
class AnsweringModel implements Model {
  readonly name = 'answering';
  requests: ModelRequest[] = [];
  constructor(private readonly answers: string[]) {}
  async call(request: ModelRequest): Promise<ModelResponse> {
    this.requests.push(structuredClone(request));
    const answer = this.answers[Math.min(this.requests.length - 1, this.answers.length - 1)] ?? '';
    return { toolCalls: [], answer, usage: { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 } };
  }
}

const noTools: ToolExecutor = {
  definitions: () => [{ name: 'page.read', description: 'reads', parameters: {} }],
  execute: async () => ({ ok: true, result: {} }),
};

function execute(model: Model, run: MemoryRun, limits: RunLimits = TEST_LOOP_LIMITS) {
  return runExecution({
    run,
    model,
    tools: noTools,
    policy: { needsApproval: async () => false, park: async () => 'never' },
    limits,
    deadlineMs: Date.now() + 60_000,
    signal: new AbortController().signal,
    ...outputOption({ text: 'read it', output_schema: SCHEMA }),
  });
}

describe('a final answer against the output schema', () => {
  it('succeeds with the validated value, and the model is given the schema', async () => {
    const model = new AnsweringModel(['{"title":"Lamp","price":12.5}']);
    const end = await execute(model, new MemoryRun());
    expect(end).toEqual({
      kind: 'succeeded',
      answer: '{"title":"Lamp","price":12.5}',
      output: { title: 'Lamp', price: 12.5 },
    });
    expect(model.requests[0]?.outputSchema).toEqual(SCHEMA);
  });

  it("tells an invalid answer back once with the validator's errors, answer-only, then takes the corrected one", async () => {
    const model = new AnsweringModel(['{"title":"Lamp"}', '{"title":"Lamp","price":3}']);
    const run = new MemoryRun();
    const end = await execute(model, run);
    expect(end).toMatchObject({ kind: 'succeeded', output: { title: 'Lamp', price: 3 } });
    expect(model.requests).toHaveLength(2);
    expect(model.requests[0]?.tools.length).toBe(1);
    expect(model.requests[1]?.tools).toEqual([]);
    const correction = model.requests[1]?.transcript.at(-1);
    expect(correction).toMatchObject({
      kind: 'input',
      outputErrors: ["/ must have required property 'price'"],
    });
    expect(run.usageNow.modelCalls).toBe(2);
  });

  it('ends the run invalid_output after the one correction', async () => {
    const model = new AnsweringModel(['not json', '{"title":1,"price":2}']);
    const end = await execute(model, new MemoryRun());
    expect(end).toMatchObject({ kind: 'failed', code: 'invalid_output', step: 2 });
    expect(end.kind === 'failed' && end.detail).toContain('/title must be string');
    expect(model.requests).toHaveLength(2);
  });

  it('ends the run invalid_output at once when no model call is left for the correction', async () => {
    const model = new AnsweringModel(['{"title":"Lamp"}']);
    const run = new MemoryRun();
    // The answer is the run's last model call: the reserve is spent.
    run.usageNow.modelCalls = TEST_LOOP_LIMITS.maxModelCalls - 1;
    const end = await execute(model, run);
    expect(end).toMatchObject({ kind: 'failed', code: 'invalid_output' });
    expect(model.requests).toHaveLength(1);
  });
});

describe('which schemas are taken (refused 422 at submission)', () => {
  it('takes a draft 2020-12 schema with local references', () => {
    expect(
      outputSchemaProblem({
        $defs: { item: { type: 'object', properties: { sku: { type: 'string' } } } },
        type: 'array',
        prefixItems: [{ $ref: '#/$defs/item' }],
      }),
    ).toBeUndefined();
  });

  it('refuses a schema nested too deeply, one too large, an unknown keyword and a remote reference', () => {
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < OUTPUT_SCHEMA_BOUNDS.maxDepth; level += 1)
      deep = { type: 'object', properties: { a: deep } };
    expect(outputSchemaProblem(deep)).toMatch(/nested deeper/);
    const large = { type: 'object', description: 'x'.repeat(OUTPUT_SCHEMA_BOUNDS.maxBytes) };
    expect(outputSchemaProblem(large)).toMatch(/bytes of JSON/);
    expect(outputSchemaProblem({ type: 'object', propertys: {} })).toMatch(/unknown keyword/);
    expect(outputSchemaProblem({ $ref: 'https://schemas.example/x.json' })).toMatch(/resolve reference/);
    expect(outputSchemaProblem({ items: { $id: 'https://schemas.example/item' } })).toMatch(
      /\$id is outside/,
    );
  });

  it('compiles the same schema again and again: nothing stays behind in the validator', () => {
    for (let time = 0; time < 3; time += 1) expect(outputSchemaProblem(SCHEMA)).toBeUndefined();
  });
});
