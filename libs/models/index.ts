/**
 * The model adapters: each implements the run loop's `Model` port (`libs/runtime/model.ts`) —
 * an OpenAI-compatible endpoint, an MCP client's own model, a script for tests and demos — and the
 * metering any of them is wrapped in.
 */

export { McpClientModel } from './mcp-model.js';
export { type ModelMetrics, meteredModel, modelLabel, modelMetricsOf, OTHER_MODEL } from './model-metrics.js';
export {
  type AttemptFailureCode,
  chatMessages,
  compileOpenAiModelOptions,
  decodeToolName,
  encodeToolName,
  type ModelAttempt,
  ModelCallError,
  type ModelCallErrorCode,
  OpenAiCompatibleModel,
  type OpenAiCompatibleModelOptions,
} from './openai-model.js';
export {
  type Script,
  ScriptedModel,
  type ScriptStep,
  scriptSchema,
  scriptStepSchema,
} from './scripted-model.js';
