import { compileOutputSchema, readOutput } from '../contracts/index.js';
import { checkCostBeforeCall } from './cost.js';
import { checkModelCall } from './limits.js';
import type { ExecutionEnd, RunLoopOptions } from './loop-ports.js';
import { ModelError, type TranscriptEntry } from './model.js';

/** The run's `output_schema` (its input carries it from the submission or the session), compiled. */
export function outputOption(input: unknown): Pick<RunLoopOptions, 'output'> {
  const schema = (input as { output_schema?: unknown } | null)?.output_schema;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) return {};
  try {
    return { output: { schema: schema as Record<string, unknown>, validate: compileOutputSchema(schema) } };
  } catch (error) {
    // The API compiled it at submission; a schema stored otherwise fails the run as a model's would.
    throw new ModelError(
      `the run's output schema does not compile: ${error instanceof Error ? error.message : 'unknown'}`,
    );
  }
}

/**
 * A final answer read against the run's output schema. It succeeds with the validated value; an
 * answer that does not validate goes back to the model once, with the validator's errors, as an
 * answer-only call (ADR-0130 d3: the final answer's reserve pays for it); a second one, or one with
 * no model call left to correct it, ends the run `invalid_output`. Undefined: the loop goes on to
 * the correction turn, its entry already in the transcript.
 */
export async function finalAnswerEnd(
  answer: string,
  transcript: TranscriptEntry[],
  step: number,
  options: RunLoopOptions,
): Promise<ExecutionEnd | undefined> {
  if (!options.output) return { kind: 'succeeded', answer };
  const read = readOutput(answer, options.output.validate);
  if (read.ok) return { kind: 'succeeded', answer, output: read.value };
  const invalid: ExecutionEnd = {
    kind: 'failed',
    code: 'invalid_output',
    detail: `the answer does not take the output schema: ${read.errors.join('; ')}`,
    step,
  };
  if (correctionTold(transcript) || !(await correctionAffordable(options))) return invalid;
  const entry: TranscriptEntry = {
    kind: 'input',
    text: correctionText(read.errors),
    outputErrors: read.errors,
  };
  transcript.push(entry);
  await options.run.appendTranscript(entry);
  return undefined;
}

/** The run told its model once already that an answer missed the schema. */
export function correctionTold(transcript: readonly TranscriptEntry[]): boolean {
  return transcript.some((entry) => entry.kind === 'input' && entry.outputErrors !== undefined);
}

/** The turn that answers a correction may only answer: the last entry is the correction itself. */
export function answeringCorrection(transcript: readonly TranscriptEntry[]): boolean {
  const last = transcript.at(-1);
  return last?.kind === 'input' && last.outputErrors !== undefined;
}

/** Whether one more model call (answer-only) is within the counts and the cost limit. */
async function correctionAffordable(options: RunLoopOptions): Promise<boolean> {
  const usage = await options.run.usage();
  if (!checkModelCall(options.limits, usage).allowed) return false;
  if (!options.price || !options.costLimits) return true;
  return checkCostBeforeCall(options.costLimits, usage.costMicroUsd ?? 0, options.price).allowed;
}

function correctionText(errors: readonly string[]): string {
  return [
    'Your final answer does not take the output schema this run was given. The validator said:',
    ...errors.map((error) => `- ${error}`),
    'Answer again with only the JSON value that takes the schema; no tools, no other text.',
  ].join('\n');
}
