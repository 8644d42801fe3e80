import {
  callCostMicroUsd,
  type Model,
  ModelBudgetExceeded,
  ModelError,
  type ModelPrice,
  type ModelUsage,
} from '../runtime/index.js';
import type { Counter, Histogram, Metrics } from '../telemetry/index.js';

/** The run worker's model metrics, from the catalogue's `model*` entries. */
export interface ModelMetrics {
  calls: Pick<Counter<'model' | 'result'>, 'inc'>;
  callSeconds: Pick<Histogram<'model'>, 'observe'>;
  tokens: Pick<Counter<'model' | 'kind'>, 'inc'>;
  costUsd: Pick<Counter<'model'>, 'inc'>;
}

/** The model metrics of a process's registry. */
export function modelMetricsOf(metrics: Pick<Metrics, 'of'>): ModelMetrics {
  return {
    calls: metrics.of('modelCalls'),
    callSeconds: metrics.of('modelCallSeconds'),
    tokens: metrics.of('modelTokens'),
    costUsd: metrics.of('modelCost'),
  };
}

/** Label for a model outside the deployment's list, so a client's name cannot add series. */
export const OTHER_MODEL = 'other';

/** A call's `result` label: `ok`, or one of these codes; anything else is `error`. */
const RESULT_CODES: ReadonlySet<string> = new Set([
  'model_error',
  'model_rejected',
  'model_unavailable',
  'invalid_output',
  'invalid_request',
  'deadline_exceeded',
]);

/**
 * The `model` label of an agent's model: its name where the deployment lists it (ops/models.yaml)
 * or it is the scripted model, else `other` — an agent names any string it likes.
 */
export function modelLabel(listed: Readonly<Record<string, unknown>>, name: string): string {
  return name === 'scripted' || Object.hasOwn(listed, name) ? name : OTHER_MODEL;
}

function resultOf(error: unknown): string {
  if (error instanceof ModelBudgetExceeded) return 'budget_exceeded';
  if (error instanceof ModelError) return RESULT_CODES.has(error.code) ? error.code : 'error';
  if (error instanceof Error && error.name === 'AbortError') return 'aborted';
  return 'error';
}

/**
 * `model` with each call counted (by result), timed, and its tokens (uncached input, cached input,
 * output) and cost (priced by ops/models.yaml) added — a failed call's billed attempts too. The
 * model's answer and error pass through untouched; metrics never fail a call.
 */
export function meteredModel(
  model: Model,
  metrics: ModelMetrics,
  label: string,
  price: ModelPrice | undefined,
): Model {
  const record = (startedMs: number, result: string, usage: ModelUsage | undefined) => {
    try {
      metrics.calls.inc({ model: label, result });
      metrics.callSeconds.observe({ model: label }, (performance.now() - startedMs) / 1000);
      if (!usage) return;
      metrics.tokens.inc({ model: label, kind: 'input' }, usage.inputTokens - usage.cachedInputTokens);
      metrics.tokens.inc({ model: label, kind: 'cached_input' }, usage.cachedInputTokens);
      metrics.tokens.inc({ model: label, kind: 'output' }, usage.outputTokens);
      if (price) metrics.costUsd.inc({ model: label }, callCostMicroUsd(price, usage) / 1_000_000);
    } catch {
      // A usage no price takes (the loop refuses it on its own path) is not worth failing the call over.
    }
  };
  return {
    name: model.name,
    ...(model.scripted ? { scripted: model.scripted } : {}),
    async call(request, limits) {
      const startedMs = performance.now();
      try {
        const response = await model.call(request, limits);
        record(startedMs, 'ok', response.usage);
        return response;
      } catch (error) {
        record(startedMs, resultOf(error), error instanceof ModelError ? error.usage : undefined);
        throw error;
      }
    },
  };
}
