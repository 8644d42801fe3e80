import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import { z } from 'zod';
import { boundedJson, jsonBoundsProblem } from './bounded-json.js';

/**
 * A caller's `output_schema`: the JSON Schema (draft 2020-12) a run's final answer must take. Its
 * size and nesting are bounded before Ajv sees it, so compiling costs no more than a small schema.
 */
export const OUTPUT_SCHEMA_BOUNDS = { maxDepth: 16, maxBytes: 16 * 1024 } as const;

/** Validator errors told back to the model (and kept in the run's error): the first ones only. */
export const OUTPUT_ERRORS_TOLD = 10;

/**
 * Ajv's 2020-12 build, strict about the schema (an unknown keyword is refused at submission, not
 * silently ignored at the answer) and lenient about what 2020-12 itself allows (types left out,
 * open tuples). `format` stays an annotation, as 2020-12 makes it by default. No `loadSchema`: a
 * `$ref` resolves inside the schema or the schema is refused, so nothing is ever fetched. One
 * instance for the process (a fresh one compiles its meta-schema first, some 80 ms); each schema is
 * removed from it right after its compile, so schemas never meet, and the subset has no `$id` or
 * anchors that could register a name in it.
 */
const ajv = new Ajv2020({
  strictSchema: true,
  strictNumbers: true,
  strictTypes: false,
  strictTuples: false,
  strictRequired: false,
  allowUnionTypes: true,
  validateFormats: false,
  allErrors: true,
  logger: false,
});

/** Keywords that name a schema resource: left out of the subset, references are local pointers. */
const NAMING_KEYWORDS = new Set(['$id', '$anchor', '$dynamicAnchor', '$dynamicRef']);

export type OutputValidator = (value: unknown) => { ok: true } | { ok: false; errors: string[] };

/** Compiles a schema that passed {@link outputSchemaSchema}; throws what Ajv refuses. */
export function compileOutputSchema(schema: unknown): OutputValidator {
  const naming = namingKeyword(schema);
  if (naming) throw new Error(`${naming} is outside the supported subset (references are local: "#/...")`);
  const owned = structuredClone(schema) as object;
  let validate: ValidateFunction;
  try {
    validate = ajv.compile(owned);
  } finally {
    ajv.removeSchema(owned);
  }
  return (value) =>
    validate(value) ? { ok: true } : { ok: false, errors: describeErrors(validate.errors ?? []) };
}

/** The first naming keyword anywhere in the schema (iterative: the schema's depth is bounded anyway). */
function namingKeyword(schema: unknown): string | undefined {
  const pending: unknown[] = [schema];
  for (let item = pending.pop(); item !== undefined; item = pending.pop()) {
    if (item === null || typeof item !== 'object') continue;
    if (!Array.isArray(item)) {
      const key = Object.keys(item).find((name) => NAMING_KEYWORDS.has(name));
      if (key) return key;
    }
    pending.push(...Object.values(item));
  }
  return undefined;
}

function describeErrors(errors: readonly ErrorObject[]): string[] {
  return errors
    .slice(0, OUTPUT_ERRORS_TOLD)
    .map((error) => `${error.instancePath || '/'} ${error.message ?? error.keyword}`);
}

/** Why a schema cannot be used, or undefined when it compiles within the bounds. */
export function outputSchemaProblem(schema: unknown): string | undefined {
  const bounds = jsonBoundsProblem(schema, OUTPUT_SCHEMA_BOUNDS);
  if (bounds) return bounds;
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema))
    return 'a JSON Schema object is expected';
  try {
    compileOutputSchema(schema);
    return undefined;
  } catch (error) {
    return `not a usable JSON Schema (draft 2020-12): ${error instanceof Error ? error.message : 'compile failed'}`;
  }
}

/** `output_schema` as a request carries it: refused 422 when too deep, too large or not compilable. */
export const outputSchemaSchema = boundedJson(
  OUTPUT_SCHEMA_BOUNDS,
  z.record(z.string(), z.json()).superRefine((schema, context) => {
    const problem = outputSchemaProblem(schema);
    if (problem) context.addIssue({ code: 'custom', message: problem, input: schema });
  }),
).meta({
  description: `A JSON Schema (draft 2020-12, validated by Ajv) the run's final answer must take; at most ${OUTPUT_SCHEMA_BOUNDS.maxDepth} levels and ${OUTPUT_SCHEMA_BOUNDS.maxBytes} bytes.`,
});

/**
 * The final answer read against a schema: its JSON value when it validates, else the validator's
 * errors (an answer that is not JSON at all is one error).
 */
export function readOutput(
  answer: string,
  validate: OutputValidator,
): { ok: true; value: unknown } | { ok: false; errors: string[] } {
  let value: unknown;
  try {
    value = JSON.parse(answer);
  } catch {
    return { ok: false, errors: ['the answer is not JSON'] };
  }
  const verdict = validate(value);
  return verdict.ok ? { ok: true, value } : verdict;
}
