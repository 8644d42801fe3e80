import { z } from 'zod';
import { actArgsSchema, REQUEST_PERSON_TOOL, requestPersonArgsSchema } from '../contracts/index.js';
import {
  type Model,
  ModelError,
  type ModelRequest,
  type ModelResponse,
  type ToolCall,
  type TranscriptEntry,
} from '../runtime/index.js';

/**
 * A scripted policy, given with the run: a list of steps and a final answer. A step names its
 * element by role and exact name; the scripted model resolves it against the latest observation
 * into a revision and reference, as a model would, so the tool contract stays reference-based.
 */
const targetSchema = z.strictObject({ role: z.string().min(1), name: z.string().min(1) });
/**
 * A script stops at its first failing step and the run fails with that step's code,
 * unless the step says `"may_fail": true`; then the failure is its result and the script goes on.
 */
const mayFail = z.boolean().optional();
/**
 * A script's request for a person: `{"person": "Sign in, then hand back"}` is the call
 * `browser.request_person` with that reason; the script goes on once the person hands back.
 */
const personStepSchema = z
  .strictObject({ person: requestPersonArgsSchema.shape.reason, may_fail: mayFail })
  .transform(({ person, may_fail }) => ({
    tool: REQUEST_PERSON_TOOL as typeof REQUEST_PERSON_TOOL,
    reason: person,
    ...(may_fail !== undefined ? { may_fail } : {}),
  }));
const toolStepSchema = z.discriminatedUnion('tool', [
  z.strictObject({ tool: z.literal('browser.navigate'), url: z.string().min(1), may_fail: mayFail }),
  z.strictObject({ tool: z.literal('browser.observe'), may_fail: mayFail }),
  z.strictObject({
    tool: z.literal('browser.act'),
    may_fail: mayFail,
    target: targetSchema,
    action: actArgsSchema.shape.action,
    text: z.string().optional(),
    /** `select` on a multiple select names every option to choose. */
    labels: actArgsSchema.shape.labels,
    /** `upload` names the uploaded file (`fil_…`) the run's input lists. */
    file: actArgsSchema.shape.file,
    postcondition: actArgsSchema.shape.postcondition,
  }),
  /** Starts a child run with its own script; the parent waits for its end. */
  z.strictObject({
    tool: z.literal('agent.delegate'),
    input: z.string().min(1),
    script: z.unknown(),
    may_fail: mayFail,
  }),
  /** The request for a person in full (what the shorthand below becomes, as a run stores it). */
  z.strictObject({
    tool: z.literal(REQUEST_PERSON_TOOL),
    reason: requestPersonArgsSchema.shape.reason,
    may_fail: mayFail,
  }),
]);
export const scriptStepSchema = z.union([toolStepSchema, personStepSchema]);
export type ScriptStep = z.output<typeof scriptStepSchema>;

export const scriptSchema = z.strictObject({
  steps: z.array(scriptStepSchema).max(1_000),
  answer: z.string().max(10_000).default(''),
  /** The final value of a run with an `output_schema`: answered as its JSON text, and validated as a model's. */
  output: z.json().optional(),
});
export type Script = z.output<typeof scriptSchema>;

interface ObservedElement {
  ref: string;
  role: string;
  name: string;
}

/** The latest observation in the transcript (every browser tool returns one), if any. */
function latestObservation(
  transcript: readonly TranscriptEntry[],
): { revision: string; elements: ObservedElement[] } | undefined {
  for (let index = transcript.length - 1; index >= 0; index -= 1) {
    const entry = transcript[index];
    // A note that a person held the page carries the page as they left it.
    if (entry?.kind === 'input' && entry.observation !== undefined) {
      const observation = entry.observation as { revision?: unknown; elements?: unknown };
      if (typeof observation.revision === 'string' && Array.isArray(observation.elements))
        return { revision: observation.revision, elements: observation.elements as ObservedElement[] };
      continue;
    }
    if (entry?.kind !== 'tool' || !entry.outcome.ok) continue;
    const result = entry.outcome.result as
      | { observation?: { revision?: unknown; elements?: unknown } }
      | undefined;
    const observation = result?.observation;
    if (observation && typeof observation.revision === 'string' && Array.isArray(observation.elements))
      return { revision: observation.revision, elements: observation.elements as ObservedElement[] };
  }
  return undefined;
}

/**
 * The deterministic model: its next step is the number of model turns already in the transcript,
 * so it resumes exactly where a crashed or parked run left off. It calls one tool per turn and
 * answers after the last step. Usage is counted as zero tokens (it is free).
 */
export class ScriptedModel implements Model {
  readonly name = 'scripted';
  readonly scripted = true;

  constructor(private readonly script: Script) {}

  async call(
    request: ModelRequest,
    _limits?: { deadlineMs: number; signal?: AbortSignal },
  ): Promise<ModelResponse> {
    const turn = request.transcript.filter((entry) => entry.kind === 'model').length;
    const usage = { inputTokens: 0, cachedInputTokens: 0, outputTokens: 0 };
    const step = this.script.steps[turn];
    // A script with steps left asks for its next one even when its tools were withdrawn (the
    // budget's answer reserve): the run then ends `budget_exceeded` as ADR-0130 ends a task that
    // outlasts its budget, where answering the script's answer would call undone work `succeeded`.
    if (!step) return { toolCalls: [], answer: this.#finalAnswer(), usage };
    const call = this.#toolCall(step, turn, request.transcript);
    if ('code' in call)
      return { toolCalls: [], usage, failedStep: { ...call, mayFail: step.may_fail === true } };
    return { toolCalls: [step.may_fail ? { ...call, mayFail: true } : call], usage };
  }

  #finalAnswer(): string {
    return this.script.output !== undefined ? JSON.stringify(this.script.output) : this.script.answer;
  }

  #toolCall(
    step: ScriptStep,
    turn: number,
    transcript: readonly TranscriptEntry[],
  ): ToolCall | { code: 'element_not_found'; message: string } {
    const id = `call_${turn + 1}`;
    switch (step.tool) {
      case 'browser.navigate':
        return { id, name: step.tool, args: { url: step.url } };
      case 'browser.observe':
        return { id, name: step.tool, args: {} };
      case 'browser.act': {
        const act = step;
        const observation = latestObservation(transcript);
        const matches = observation?.elements.filter(
          (element) => element.role === act.target.role && element.name === act.target.name,
        );
        const element = matches?.[0];
        // The page lacks the step's element: the script's step fails with the tool
        // contract's own code, as an act on a missing element would, not as a model failure.
        if (!observation || !element || (matches?.length ?? 0) > 1)
          return {
            code: 'element_not_found',
            message: `scripted step ${turn + 1}: ${matches && matches.length > 1 ? 'more than one' : 'no'} visible ${act.target.role} named "${act.target.name}"`,
          };
        return {
          id,
          name: step.tool,
          args: {
            revision: observation.revision,
            element: element.ref,
            action: act.action,
            ...(act.text !== undefined ? { text: act.text } : {}),
            ...(act.labels !== undefined ? { labels: act.labels } : {}),
            ...(act.file !== undefined ? { file: act.file } : {}),
            ...(act.postcondition !== undefined ? { postcondition: act.postcondition } : {}),
          },
        };
      }
      case 'agent.delegate':
        return { id, name: step.tool, args: { input: step.input, script: step.script } };
      case REQUEST_PERSON_TOOL:
        return { id, name: step.tool, args: { reason: step.reason } };
      default:
        return assertNever(step);
    }
  }
}

function assertNever(value: never): never {
  throw new ModelError(`unknown scripted step ${JSON.stringify(value)}`);
}
