import { randomBytes } from 'node:crypto';
import { sha256Hex } from '../contracts/canonical-json.js';
import {
  API_KEY_CHAIN_MAX,
  type ApiKeyIdentity,
  type ApiKeyScope,
  type ApiKeyView,
  apiKeyIdentitySchema,
  apiKeyViewSchema,
  type KeyLineage,
  newId,
  principalIdSchema,
  recordIdSchema,
  scopesMixOperator,
  scopesNotHeld,
  tenantIdSchema,
} from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/** What an API key is issued for (DESIGN §3). */
export interface NewApiKey {
  tenant: string;
  principal: string;
  scopes: readonly ApiKeyScope[];
}

/** A key just made: the key itself (shown once), whom it speaks for, and the key that made it. */
export interface IssuedApiKey {
  key: string;
  identity: ApiKeyIdentity;
  /** The key that made it, or null for the operator's (the script, the fleet's start-up keys). */
  createdBy: string | null;
}

/** Why a key could not make a key; nothing was written. */
export type ApiKeyRefusal =
  | { ok: false; code: 'scopes_not_held'; scopes: ApiKeyScope[] }
  | { ok: false; code: 'chain_too_deep'; max: number }
  | { ok: false; code: 'maker_gone' }
  | { ok: false; code: 'tenant_full'; max: number };

/**
 * Hash: the tenant's key ids → the SHA-256 of each key, so an admin can list its keys and revoke one
 * by id. It sits in the API-key namespace (`<prefix>apikey:{ten:ID}`), where a record's name is 64 hex
 * digits and never holds a brace. The hash it maps to is Leasehold's own: it is never shown. Its
 * length is the tenant's count of live keys (a revocation removes the entry).
 */
function tenantApiKeysKey(context: RunStoreContext, tenant: string): string {
  return context.keys.apiKey(`{ten:${tenant}}`);
}

/** A new key for `input`: 256 random bits, its id, and the identity it resolves to. */
function newApiKey(input: NewApiKey): { key: string; keyHash: string; identity: ApiKeyIdentity } {
  if (scopesMixOperator(input.scopes))
    throw new RangeError('an operator key carries the operator scope alone, never a tenant scope');
  const identity = apiKeyIdentitySchema.parse({
    key_id: newId('key'),
    tenant: tenantIdSchema.parse(input.tenant),
    principal: principalIdSchema.parse(input.principal),
    scopes: [...new Set(input.scopes)].sort(),
  });
  const key = `lhk_${randomBytes(32).toString('base64url')}`;
  return { key, keyHash: sha256Hex(key), identity };
}

/**
 * The key's record, named by its hash. `makers` is its whole creation chain (space-separated ids,
 * the operator's key first, its own maker last), copied from its maker's at creation: who may decide
 * an MCP-driven run's approvals is read from it, and a revoked link in the chain hides nothing.
 */
async function writeApiKeyRecord(
  context: RunStoreContext,
  keyHash: string,
  identity: ApiKeyIdentity,
  makers: readonly string[],
): Promise<void> {
  await context.redis.hset(context.keys.apiKey(keyHash), {
    key_id: identity.key_id,
    tenant: identity.tenant,
    principal: identity.principal,
    scopes: identity.scopes.join(' '),
    created_at: context.now(),
    makers: makers.join(' '),
  });
}

/**
 * Issues a key as the operator does (`npm run api-key`, the fleet's start-up keys): made by no key,
 * and not held to the tenant's bound on keys, so an operator can always reach a tenant. 256 random
 * bits, shown once. Only its SHA-256 is stored — a key of that entropy needs no slow hash, and a
 * leaked store yields no usable key.
 *
 * The record (named by the key's hash) and the tenant's index live in different Cluster slots, so
 * no one script can write both. The index entry is written first: an entry whose record never came
 * (a crash in between) lists nothing and resolves nothing, while a record without its entry would
 * be a working key that no admin could see or revoke.
 */
export async function createApiKey(context: RunStoreContext, input: NewApiKey): Promise<IssuedApiKey> {
  const { key, keyHash, identity } = newApiKey(input);
  await context.redis.hset(tenantApiKeysKey(context, identity.tenant), identity.key_id, keyHash);
  await writeApiKeyRecord(context, keyHash, identity, []);
  return { key, identity, createdBy: null };
}

/**
 * Issues a key made by the key `maker` (`POST /v1/api-keys`), in the maker's tenant: only with
 * scopes the maker holds, never past {@link API_KEY_CHAIN_MAX} makers deep, and only while the
 * tenant holds fewer than `maxPerTenant` live keys — counted and entered in one script, so API
 * replicas making keys at once cannot pass the bound together. Written in the order
 * {@link createApiKey} gives.
 */
export async function createApiKeyBy(
  context: RunStoreContext,
  maker: ApiKeyIdentity,
  input: Omit<NewApiKey, 'tenant'>,
  maxPerTenant: number,
): Promise<({ ok: true } & IssuedApiKey) | ApiKeyRefusal> {
  const missing = scopesNotHeld(maker.scopes, input.scopes);
  if (missing.length > 0) return { ok: false, code: 'scopes_not_held', scopes: missing };
  const lineage = await apiKeyLineage(context, maker.tenant, maker.key_id);
  if (!lineage) return { ok: false, code: 'maker_gone' };
  const makers = [...lineage.makers, maker.key_id];
  if (makers.length > API_KEY_CHAIN_MAX) return { ok: false, code: 'chain_too_deep', max: API_KEY_CHAIN_MAX };
  const { key, keyHash, identity } = newApiKey({ ...input, tenant: maker.tenant });
  const entered = await context.redis.addApiKey(
    tenantApiKeysKey(context, identity.tenant),
    identity.key_id,
    keyHash,
    maxPerTenant,
  );
  if (entered !== 1) return { ok: false, code: 'tenant_full', max: maxPerTenant };
  await writeApiKeyRecord(context, keyHash, identity, makers);
  return { ok: true, key, identity, createdBy: maker.key_id };
}

/** A stored `makers` field as ids; a key made before chains were kept has none. */
function makersOf(field: string | null | undefined): string[] {
  return (field ?? '').split(' ').filter(Boolean);
}

/**
 * The tenant's live key `keyId` and its makers (see {@link writeApiKeyRecord}), or undefined for a
 * key this tenant does not hold (revoked, another tenant's, never issued).
 */
export async function apiKeyLineage(
  context: RunStoreContext,
  tenant: string,
  keyId: string,
): Promise<KeyLineage | undefined> {
  if (!tenantIdSchema.safeParse(tenant).success || !recordIdSchema.safeParse(keyId).success) return undefined;
  const keyHash = await context.redis.hget(tenantApiKeysKey(context, tenant), keyId);
  if (!keyHash) return undefined;
  const [storedId, storedTenant, makers] = await context.redis.hmget(
    context.keys.apiKey(keyHash),
    'key_id',
    'tenant',
    'makers',
  );
  if (storedId !== keyId || storedTenant !== tenant) return undefined;
  return { keyId, makers: makersOf(makers) };
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
    const stored = fields as Record<string, string>;
    views.push(
      apiKeyViewSchema.parse({
        ...identity,
        created_at_ms: Number(stored.created_at ?? 0),
        created_by: makersOf(stored.makers).at(-1) ?? null,
      }),
    );
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
