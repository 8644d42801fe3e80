import type { AgentDefinition, SessionView } from '../contracts/index.js';

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

/**
 * Sessions pin their agent version and profile binding at creation and never change, so a process
 * reads each from Redis once. Bounded like {@link AgentVersionCache}.
 */
export class SessionCache {
  readonly #sessions = new Map<string, SessionView>();

  constructor(
    private readonly store: {
      getSession(tenant: string, sessionId: string): Promise<SessionView | undefined>;
    },
    private readonly capacity = 10_000,
  ) {}

  async get(tenant: string, sessionId: string): Promise<SessionView | undefined> {
    const key = `${tenant}\n${sessionId}`;
    const cached = this.#sessions.get(key);
    if (cached) return cached;
    const session = await this.store.getSession(tenant, sessionId);
    if (!session) return undefined;
    if (this.#sessions.size >= this.capacity) this.#sessions.clear();
    this.#sessions.set(key, session);
    return session;
  }
}
