import { randomBytes } from 'node:crypto';
import {
  type ApiKeyIdentity,
  type ApiKeyScope,
  type ApiKeyView,
  apiKeyIdentitySchema,
  apiKeyViewSchema,
  newId,
  principalIdSchema,
  recordIdSchema,
  scopesMixOperator,
  tenantIdSchema,
} from '../contracts/index.js';
import { sha256Hex } from './canonical-json.js';
import type { RunStoreContext } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/** What an API key is issued for (DESIGN §3). */
export interface NewApiKey {
  tenant: string;
  principal: string;
  scopes: readonly ApiKeyScope[];
}

/**
 * Hash: the tenant's key ids → the SHA-256 of each key, so an admin can list its keys and revoke one
 * by id. It sits in the API-key namespace (`<prefix>apikey:{ten:ID}`), where a record's name is 64 hex
 * digits and never holds a brace. The hash it maps to is Leasehold's own: it is never shown.
 */
function tenantApiKeysKey(context: RunStoreContext, tenant: string): string {
  return context.keys.apiKey(`{ten:${tenant}}`);
}

/**
 * Issues a key: 256 random bits, shown once. Only its SHA-256 is stored — a key of that entropy
 * needs no slow hash, and a leaked store yields no usable key.
 *
 * The record (named by the key's hash) and the tenant's index live in different Cluster slots, so
 * no one script can write both. The index entry is written first: an entry whose record never came
 * (a crash in between) lists nothing and resolves nothing, while a record without its entry would
 * be a working key that no admin could see or revoke.
 */
export async function createApiKey(
  context: RunStoreContext,
  input: NewApiKey,
): Promise<{ key: string; identity: ApiKeyIdentity }> {
  if (scopesMixOperator(input.scopes))
    throw new RangeError('an operator key carries the operator scope alone, never a tenant scope');
  const identity = apiKeyIdentitySchema.parse({
    key_id: newId('key'),
    tenant: tenantIdSchema.parse(input.tenant),
    principal: principalIdSchema.parse(input.principal),
    scopes: [...new Set(input.scopes)].sort(),
  });
  const key = `lhk_${randomBytes(32).toString('base64url')}`;
  const keyHash = sha256Hex(key);
  await context.redis.hset(tenantApiKeysKey(context, identity.tenant), identity.key_id, keyHash);
  await context.redis.hset(context.keys.apiKey(keyHash), {
    key_id: identity.key_id,
    tenant: identity.tenant,
    principal: identity.principal,
    scopes: identity.scopes.join(' '),
    created_at: context.now(),
  });
  return { key, identity };
}

/** The identity of a stored record's fields, or undefined for an absent or foreign one. */
function identityOf(fields: Record<string, string>): ApiKeyIdentity | undefined {
  if (!fields.key_id) return undefined;
  return apiKeyIdentitySchema.parse({
    key_id: fields.key_id,
    tenant: fields.tenant,
    principal: fields.principal,
    scopes: (fields.scopes ?? '').split(' ').filter(Boolean),
  });
}

/** The identity behind a presented key, or undefined for any key not issued here (or revoked). */
export async function resolveApiKey(
  context: RunStoreContext,
  presented: string,
): Promise<ApiKeyIdentity | undefined> {
  if (!presented.startsWith('lhk_') || presented.length > 128) return undefined;
  return identityOf(await context.redis.hgetall(context.keys.apiKey(sha256Hex(presented))));
}

/** The tenant's live keys, oldest first: identity and creation time, never the key or its hash. */
export async function listApiKeys(context: RunStoreContext, tenant: string): Promise<ApiKeyView[]> {
  if (!tenantIdSchema.safeParse(tenant).success) return [];
  const index = await context.redis.hgetall(tenantApiKeysKey(context, tenant));
  const entries = Object.entries(index);
  if (entries.length === 0) return [];
  const pipeline = slotBatch(context.redis);
  for (const [, keyHash] of entries) pipeline.hgetall(context.keys.apiKey(keyHash));
  const replies = (await pipeline.exec()) ?? [];
  const views: ApiKeyView[] = [];
  entries.forEach(([keyId], position) => {
    const [error, fields] = replies[position] ?? [];
    if (error) throw error;
    const identity = identityOf((fields ?? {}) as Record<string, string>);
    // An entry whose record is gone (revoked, or never written) lists nothing.
    if (!identity || identity.key_id !== keyId || identity.tenant !== tenant) return;
    const createdAtMs = Number((fields as Record<string, string>).created_at ?? 0);
    views.push(apiKeyViewSchema.parse({ ...identity, created_at_ms: createdAtMs }));
  });
  return views.sort((a, b) => a.created_at_ms - b.created_at_ms || a.key_id.localeCompare(b.key_id));
}

/**
 * Revokes the tenant's key `keyId`: true if it was live, false for an id this tenant does not hold
 * (another tenant's key is looked up in this tenant's index only, so it is never found). The record
 * goes first — that alone makes the key answer 401 — then the index entry; a crash in between
 * leaves an entry that lists nothing and that a second revocation clears.
 */
export async function revokeApiKey(
  context: RunStoreContext,
  tenant: string,
  keyId: string,
): Promise<boolean> {
  if (!tenantIdSchema.safeParse(tenant).success || !recordIdSchema.safeParse(keyId).success) return false;
  const indexKey = tenantApiKeysKey(context, tenant);
  const keyHash = await context.redis.hget(indexKey, keyId);
  if (!keyHash) return false;
  const deleted = await context.redis.del(context.keys.apiKey(keyHash));
  await context.redis.hdel(indexKey, keyId);
  return deleted === 1;
}
