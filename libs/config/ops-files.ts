import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYaml } from 'yaml';
import { z } from 'zod';

/** A USD amount as a decimal string ("30", "0.15"), so limits never carry float noise. */
const usd = z
  .union([z.string(), z.number()])
  .transform(String)
  .pipe(z.string().regex(/^\d{1,7}(\.\d{1,6})?$/, 'a non-negative USD amount such as "30" or "0.15"'));

const countLimits = z.object({
  max_steps: z.number().int().positive(),
  max_model_calls: z.number().int().positive(),
  max_tool_calls: z.number().int().positive(),
  reserve_model_calls: z.number().int().nonnegative(),
  reserve_tool_calls: z.number().int().nonnegative(),
});

const limitsFileSchema = z.object({
  run_defaults: countLimits.extend({ max_cost_usd: usd.nullable().default(null) }),
  browser_task: z.object({
    max_steps: z.number().int().positive(),
    max_model_calls: z.number().int().positive(),
    max_tool_calls: z.number().int().positive(),
    max_cost_usd: usd,
    cost_reserve_usd: usd,
  }),
});

export type LimitsFile = z.output<typeof limitsFileSchema>;

const modelPriceSchema = z.object({
  provider: z.enum(['scripted', 'openai-compatible']),
  /** USD per million tokens. */
  input_usd_per_mtok: usd,
  cached_input_usd_per_mtok: usd,
  output_usd_per_mtok: usd,
  context_window_tokens: z.number().int().positive(),
  base_url: z.url().optional(),
  /** Name of the environment variable holding the API key (the key itself never sits in a file). */
  api_key_env: z
    .string()
    .regex(/^[A-Z][A-Z0-9_]*$/)
    .optional(),
  /** The model name sent to the API (default: this entry's key). */
  api_model: z.string().min(1).max(200).optional(),
  /** At most 8,192: the cost pre-check prices a call's worst case at 8,192 output tokens (ADR-0130 d1). */
  max_output_tokens: z.number().int().positive().max(8_192).optional(),
  temperature: z.number().min(0).max(2).optional(),
  /** Attempts per model call, the first included; transient failures are retried within it. */
  attempts: z.number().int().min(1).max(5).optional(),
  timeout_ms: z.number().int().min(1_000).max(600_000).optional(),
});

const modelsFileSchema = z.object({
  default_model: z.string().min(1),
  models: z.record(z.string().min(1), modelPriceSchema),
});

export type ModelsFile = z.output<typeof modelsFileSchema>;

export class OpsFileError extends Error {
  override readonly name = 'OpsFileError';
}

function readYaml(path: string): unknown {
  try {
    return parseYaml(readFileSync(path, 'utf8'));
  } catch (error) {
    throw new OpsFileError(`${path}: could not be read as YAML (${(error as Error).message.split('\n')[0]})`);
  }
}

function parseWith<T extends z.ZodType>(schema: T, path: string, raw: unknown): z.output<T> {
  const parsed = schema.safeParse(raw);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  const where = issue?.path.join('.') || '(root)';
  throw new OpsFileError(`${path}: ${where}: ${issue?.message ?? 'invalid'}`);
}

/**
 * Checks the rules that hold between limits (ADR-0130 d3): each reserve strictly below its total,
 * and the browser-task overlay never below the run defaults.
 */
export function checkLimits(limits: LimitsFile, path = 'limits.yaml'): LimitsFile {
  const defaults = limits.run_defaults;
  const overlay = limits.browser_task;
  const fail = (message: string): never => {
    throw new OpsFileError(`${path}: ${message}`);
  };
  if (defaults.reserve_model_calls >= defaults.max_model_calls)
    fail('run_defaults.reserve_model_calls: expected below max_model_calls');
  if (defaults.reserve_tool_calls >= defaults.max_tool_calls)
    fail('run_defaults.reserve_tool_calls: expected below max_tool_calls');
  if (defaults.reserve_model_calls >= overlay.max_model_calls)
    fail('browser_task.max_model_calls: expected above run_defaults.reserve_model_calls');
  if (defaults.reserve_tool_calls >= overlay.max_tool_calls)
    fail('browser_task.max_tool_calls: expected above run_defaults.reserve_tool_calls');
  if (Number(overlay.cost_reserve_usd) >= Number(overlay.max_cost_usd))
    fail('browser_task.cost_reserve_usd: expected below max_cost_usd');
  for (const key of ['max_steps', 'max_model_calls', 'max_tool_calls'] as const) {
    if (overlay[key] < defaults[key])
      fail(
        `browser_task.${key}: expected at least run_defaults.${key} (${defaults[key]}), got ${overlay[key]}`,
      );
  }
  return limits;
}

export function loadLimitsFile(opsDir: string): LimitsFile {
  const path = join(opsDir, 'limits.yaml');
  return checkLimits(parseWith(limitsFileSchema, path, readYaml(path)), path);
}

export function loadModelsFile(opsDir: string): ModelsFile {
  const path = join(opsDir, 'models.yaml');
  const models = parseWith(modelsFileSchema, path, readYaml(path));
  if (!(models.default_model in models.models))
    throw new OpsFileError(`${path}: default_model: "${models.default_model}" is not listed under models`);
  for (const [name, model] of Object.entries(models.models)) {
    if (model.provider === 'openai-compatible' && (!model.base_url || !model.api_key_env))
      throw new OpsFileError(
        `${path}: models.${name}: an openai-compatible model needs base_url and api_key_env`,
      );
  }
  return models;
}
