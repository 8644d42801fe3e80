import { createHash } from 'node:crypto';
import type { Config } from '../../libs/config/index.js';
import { type AgentDefinition, ApiError } from '../../libs/contracts/index.js';
import { defaultAgentDefinition } from '../../libs/runtime/index.js';
import type { RunStore } from '../../libs/store/index.js';

const ID_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * The id of a tenant's default agent, or of its variant on another chat model (ADR-0130 d2): derived,
 * so every API replica names the same agent without a lookup.
 */
export function defaultAgentId(tenant: string, model?: string): string {
  const digest = createHash('sha256')
    .update(`default-agent\n${tenant}\n${model ?? ''}`)
    .digest();
  let body = '';
  for (const byte of digest.subarray(0, 20)) body += ID_ALPHABET[byte & 31];
  return `agt_dflt-${body}`;
}

/**
 * The composition root's default agent for a tenant: made on first use, and given a new version
 * when the configuration changes it (sessions already created keep the version they pinned).
 * Browser tools are enabled where the run side can reach browser workers (a data-plane token).
 */
export class DefaultAgents {
  readonly #ensured = new Map<string, string>();

  constructor(
    private readonly store: RunStore,
    private readonly config: Config,
  ) {}

  get browserTools(): boolean {
    return this.config.secrets.dataPlaneToken !== undefined;
  }

  definition(model?: string): AgentDefinition {
    if (model !== undefined && !(model in this.config.models.models))
      throw new ApiError('validation_failed', `model "${model}" is not listed in ops/models.yaml`);
    const chosen = model === this.config.models.default_model ? undefined : model;
    return defaultAgentDefinition(this.config, {
      browserTools: this.browserTools,
      ...(chosen !== undefined ? { model: chosen } : {}),
    });
  }

  /** The default agent's id for `tenant` (on `model`, a variant), written if it is new or changed. */
  async ensure(tenant: string, model?: string): Promise<string> {
    const definition = this.definition(model);
    const chosen = definition.model === this.config.models.default_model ? undefined : definition.model;
    const id = defaultAgentId(tenant, chosen);
    const key = `${id}\n${JSON.stringify(definition)}`;
    if (this.#ensured.get(id) === key) return id;
    const outcome = await this.store.upsertAgent(tenant, definition, id);
    if (outcome.status === 'not_found') throw new Error(`default agent ${id} is held by another tenant`);
    this.#ensured.set(id, key);
    return id;
  }
}
