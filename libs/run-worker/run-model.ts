import { createHmac } from 'node:crypto';
import type { Config } from '../config/index.js';
import { type DeclaredSecretName, inputFileIds, mcpDriverKeyOf, type RunView } from '../contracts/index.js';
import {
  McpClientModel,
  meteredModel,
  modelLabel,
  OpenAiCompatibleModel,
  ScriptedModel,
  scriptSchema,
} from '../models/index.js';
import {
  argumentSealer,
  BROWSER_TOOL_NAMES_REQUIRED,
  LoopBreaker,
  type Model,
  ModelError,
  modelPrice,
  type RunLoopOptions,
} from '../runtime/index.js';
import { AgentVersionCache, type RunStore } from '../store/index.js';
import type { McpTurns } from '../store/mcp-turns.js';
import type { ExecutionDeps } from './execution-deps.js';

/**
 * What ADR-0130 adds to a run's loop: its model's prices and cost limit (d1), the loop breaker
 * (d7), and in a bound session the required browser tools (d4) and the origins row (d9).
 */
export async function budgetOptions(
  deps: ExecutionDeps,
  run: RunView,
  agentModel: string,
): Promise<Partial<RunLoopOptions>> {
  const entry = deps.config.models.models[agentModel];
  const options: Partial<RunLoopOptions> = {
    costLimits: run.limits,
    breaker: new LoopBreaker({ evidenceSecret: evidenceSecret(deps.config, run.id) }),
  };
  if (entry) options.price = modelPrice(entry);
  if (run.browser_profile_id) {
    options.requiredTools = BROWSER_TOOL_NAMES_REQUIRED;
    // The profile's normalised origins only: never its id, a name or a credential.
    const origins = (
      await deps.profiles.allowedOrigins({ tenant: run.tenant, id: run.browser_profile_id })
    ).slice(0, MAX_ORIGINS_RENDERED);
    const secrets = await deps.store.declaredSecrets(run.id);
    const files = await filesRow(deps.store, run);
    options.runtimeMetadata = {
      browser_origins: origins.join(','),
      // DESIGN §12: the run's declared secrets by name and origin, never by value; a fill types one
      // as {{secret:NAME}} (the act tool's description says how).
      ...(secrets.length > 0 ? { browser_secrets: secretsRow(secrets) } : {}),
      // DESIGN §12: the files an `upload` act may set a file input to, by id and name.
      ...(files ? { browser_files: files } : {}),
    };
  }
  return options;
}

/** `pw@https://shop.test|https://pay.test,otp@https://shop.test`: one line, names and origins only. */
function secretsRow(secrets: readonly DeclaredSecretName[]): string {
  return secrets.map((secret) => `${secret.name}@${secret.origins.join('|')}`).join(',');
}

/** `fil_…=invoice.pdf,fil_…=photo.jpg`: the uploads the run's input lists, by id and name; undefined for none. */
async function filesRow(store: RunStore, run: RunView): Promise<string | undefined> {
  const fileIds = inputFileIds(run.input);
  if (fileIds.length === 0) return undefined;
  const records = await Promise.all(
    fileIds.map((fileId) => store.uploads.runUpload(run.id, run.tenant, fileId)),
  );
  return fileIds.map((fileId, index) => `${fileId}=${records[index]?.name ?? 'unknown'}`).join(',');
}

/** ADR-0130 d9: at most 16 origins are rendered in the row. */
const MAX_ORIGINS_RENDERED = 16;

/**
 * Keys the breaker's evidence digests: the same for every execution of a run, never stored beside
 * them (derived from the deployment's secret and the run id).
 */
function evidenceSecret(config: Config, runId: string): string {
  const secret = config.secrets.sealKey ?? config.secrets.dataPlaneToken ?? 'leasehold';
  return createHmac('sha256', secret).update(`loop-breaker\n${runId}`).digest('hex');
}

/** Seals secret tool arguments under the deployment's secret; without one, memory only. */
export function argumentSealing(config: Config, runId: string): Pick<RunLoopOptions, 'argumentSealer'> {
  const secret = config.secrets.sealKey ?? config.secrets.dataPlaneToken;
  return secret ? { argumentSealer: argumentSealer(secret, runId) } : {};
}

/**
 * The run's model: the MCP client that drives it (its input says `driver: 'mcp'`),
 * `scripted` from the script it carries, or an `openai-compatible` one from ops/models.yaml.
 */
export function modelFor(
  config: Config,
  agentModel: string,
  run: RunView,
  mcp?: { turns: McpTurns | undefined; stopRequested: () => Promise<boolean> },
): Model {
  if (mcpDriverKeyOf(run) !== undefined) {
    if (!mcp?.turns) throw new ModelError('this run worker cannot reach MCP clients');
    return new McpClientModel({
      runId: run.id,
      turns: mcp.turns,
      idleTimeoutMs: config.api.mcpIdleTimeoutMs,
      stopRequested: mcp.stopRequested,
    });
  }
  const entry = config.models.models[agentModel];
  if (agentModel === 'scripted' || entry?.provider === 'scripted') {
    const script = scriptSchema.safeParse(
      (run.input as { script?: unknown }).script ?? { steps: [], answer: '' },
    );
    if (!script.success) throw new ModelError('the run carries no valid script for the scripted model');
    return new ScriptedModel(script.data);
  }
  if (!entry?.base_url) throw new ModelError(`model ${agentModel} is not listed in ops/models.yaml`);
  const apiKey = config.secrets.modelApiKeys[agentModel];
  if (!apiKey)
    throw new ModelError(`model ${agentModel} has no API key: set ${entry.api_key_env ?? 'its api_key_env'}`);
  return new OpenAiCompatibleModel({
    name: agentModel,
    model: entry.api_model ?? agentModel,
    baseUrl: entry.base_url,
    apiKey,
    ...(entry.max_output_tokens !== undefined ? { maxOutputTokens: entry.max_output_tokens } : {}),
    ...(entry.temperature !== undefined ? { temperature: entry.temperature } : {}),
    ...(entry.attempts !== undefined ? { attempts: entry.attempts } : {}),
    ...(entry.timeout_ms !== undefined ? { timeoutMs: entry.timeout_ms } : {}),
  });
}

/**
 * The run's model, metered where the run worker keeps model metrics: labelled by its
 * name when ops/models.yaml lists it (else `other`) and priced by its entry there.
 */
export function meteredModelFor(deps: ExecutionDeps, agentModel: string, run: RunView): Model {
  const model = modelFor(deps.config, agentModel, run, {
    turns: deps.mcpTurns,
    stopRequested: async () =>
      deps.cancelsHeard?.has(run.id) === true || (await deps.store.stopRequested(run.id)),
  });
  if (!deps.modelMetrics) return model;
  const listed = deps.config.models.models;
  const entry = listed[agentModel];
  return meteredModel(
    model,
    deps.modelMetrics,
    modelLabel(listed, agentModel),
    entry ? modelPrice(entry) : undefined,
  );
}

const caches = new WeakMap<RunStore, AgentVersionCache>();
/** One agent-version cache per store: versions are content-addressed and never change. */
export function agentVersions(deps: ExecutionDeps): AgentVersionCache {
  let cache = caches.get(deps.store);
  if (!cache) {
    cache = new AgentVersionCache(deps.store);
    caches.set(deps.store, cache);
  }
  return cache;
}
