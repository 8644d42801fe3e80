import type { AgentDefinition } from '../contracts/index.js';

/**
 * Agent versions are content-addressed and never change, so a process reads each from Redis once.
 * Bounded: past `capacity` entries the cache starts afresh.
 */
export class AgentVersionCache {
  readonly #versions = new Map<string, AgentDefinition>();

  constructor(
    private readonly store: {
      getAgentVersion(tenant: string, agentId: string, version: string): Promise<AgentDefinition | undefined>;
    },
    private readonly capacity = 1_000,
  ) {}

  async get(tenant: string, agentId: string, version: string): Promise<AgentDefinition | undefined> {
    const key = `${tenant}\n${agentId}\n${version}`;
    const cached = this.#versions.get(key);
    if (cached) return cached;
    const definition = await this.store.getAgentVersion(tenant, agentId, version);
    if (!definition) return undefined;
    if (this.#versions.size >= this.capacity) this.#versions.clear();
    this.#versions.set(key, definition);
    return definition;
  }
}
