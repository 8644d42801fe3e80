import { canonicalJson, sha256Hex } from '../contracts/canonical-json.js';
import {
  type AgentDefinition,
  type AgentView,
  agentDefinitionSchema,
  agentVersionSchema,
  agentViewSchema,
  newId,
  recordIdSchema,
  type SessionView,
  sessionViewSchema,
} from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';

/**
 * Agents (content-addressed versions) and sessions (pinning one version, optionally bound to a
 * profile). Both are tenant-scoped: another tenant's record reads as absent.
 */

export type PutAgentOutcome =
  | { status: 'created' | 'updated' | 'unchanged'; agent: AgentView; version: string }
  | { status: 'not_found' };

/** The version of a definition: SHA-256 of its canonical JSON, after defaults are applied. */
export function agentVersionOf(definition: AgentDefinition): string {
  return sha256Hex(canonicalJson(agentDefinitionSchema.parse(definition)));
}

/**
 * Creates an agent (no `agentId`) or gives the tenant's agent `agentId` a new version. Versions
 * are immutable: putting content already stored answers its existing version.
 */
export async function putAgent(
  context: RunStoreContext,
  tenant: string,
  definitionInput: unknown,
  agentId?: string,
  upsert = false,
): Promise<PutAgentOutcome> {
  if (agentId !== undefined && !recordIdSchema.safeParse(agentId).success) return { status: 'not_found' };
  const definition = agentDefinitionSchema.parse(definitionInput);
  const canonical = canonicalJson(definition);
  const version = sha256Hex(canonical);
  const id = agentId ?? newId('agt');
  const [status] = await context.redis.putAgent(
    context.keys.agent(id),
    context.keys.agentVersions(id),
    id,
    tenant,
    version,
    canonical,
    context.now(),
    agentId ? (upsert ? 'upsert' : 'update') : 'create',
  );
  if (status === 'not_found') return { status };
  if (status !== 'created' && status !== 'updated' && status !== 'unchanged') {
    throw new Error(`putAgent answered ${status}`);
  }
  const agent = await getAgent(context, tenant, id);
  if (!agent) throw new Error(`agent ${id} vanished after it was written`);
  return { status, agent, version };
}

export async function getAgent(
  context: RunStoreContext,
  tenant: string,
  agentId: string,
): Promise<AgentView | undefined> {
  if (!recordIdSchema.safeParse(agentId).success) return undefined;
  const fields = await context.redis.hgetall(context.keys.agent(agentId));
  if (!fields.id || fields.tenant !== tenant) return undefined;
  return agentViewSchema.parse({
    id: fields.id,
    tenant: fields.tenant,
    latest_version: fields.latest_version,
    created_at_ms: Number(fields.created_at),
    updated_at_ms: Number(fields.updated_at),
  });
}

export async function getAgentVersion(
  context: RunStoreContext,
  tenant: string,
  agentId: string,
  version: string,
): Promise<AgentDefinition | undefined> {
  if (!agentVersionSchema.safeParse(version).success || !recordIdSchema.safeParse(agentId).success) {
    return undefined;
  }
  const [owner, canonical] = await Promise.all([
    context.redis.hget(context.keys.agent(agentId), 'tenant'),
    context.redis.hget(context.keys.agentVersions(agentId), version),
  ]);
  if (owner !== tenant || canonical === null) return undefined;
  return agentDefinitionSchema.parse(JSON.parse(canonical));
}

export interface NewSession {
  tenant: string;
  principal: string;
  agentId: string;
  /** The version to pin; the agent's latest when omitted. */
  agentVersion?: string;
  /** The trusted profile binding (DESIGN §3); fixed for the session's life. */
  browserProfileId?: string;
}

/** A new session pinned to an existing version of the tenant's agent; undefined if there is none. */
export async function createSession(
  context: RunStoreContext,
  input: NewSession,
): Promise<SessionView | undefined> {
  const agent = await getAgent(context, input.tenant, input.agentId);
  if (!agent) return undefined;
  const version = input.agentVersion ?? agent.latest_version;
  // Versions are immutable, so this read cannot go stale before the session is written.
  if (!(await getAgentVersion(context, input.tenant, agent.id, version))) return undefined;
  const session = sessionViewSchema.parse({
    id: newId('ses'),
    tenant: input.tenant,
    principal: input.principal,
    agent_id: agent.id,
    agent_version: version,
    browser_profile_id: input.browserProfileId ?? null,
    created_at_ms: context.now(),
  });
  // A fresh id: nothing else can write this key, so one HSET is the whole creation.
  await context.redis.hset(context.keys.session(session.id), {
    id: session.id,
    tenant: session.tenant,
    principal: session.principal,
    agent_id: session.agent_id,
    agent_version: session.agent_version,
    profile_id: session.browser_profile_id ?? '',
    created_at: session.created_at_ms,
  });
  return session;
}

export async function getSession(
  context: RunStoreContext,
  tenant: string,
  sessionId: string,
): Promise<SessionView | undefined> {
  if (!recordIdSchema.safeParse(sessionId).success) return undefined;
  const fields = await context.redis.hgetall(context.keys.session(sessionId));
  if (!fields.id || fields.tenant !== tenant) return undefined;
  return sessionViewSchema.parse({
    id: fields.id,
    tenant: fields.tenant,
    principal: fields.principal,
    agent_id: fields.agent_id,
    agent_version: fields.agent_version,
    browser_profile_id: fields.profile_id || null,
    created_at_ms: Number(fields.created_at),
  });
}
