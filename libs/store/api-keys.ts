import { randomBytes } from 'node:crypto';
import {
  type ApiKeyIdentity,
  type ApiKeyScope,
  apiKeyIdentitySchema,
  newId,
  principalIdSchema,
  tenantIdSchema,
} from '../contracts/index.js';
import { sha256Hex } from './canonical-json.js';
import type { RunStoreContext } from './run-keys.js';

/** What an API key is issued for (DESIGN §3). */
export interface NewApiKey {
  tenant: string;
  principal: string;
  scopes: readonly ApiKeyScope[];
}

/**
 * Issues a key: 256 random bits, shown once. Only its SHA-256 is stored — a key of that entropy
 * needs no slow hash, and a leaked store yields no usable key.
 */
export async function createApiKey(
  context: RunStoreContext,
  input: NewApiKey,
): Promise<{ key: string; identity: ApiKeyIdentity }> {
  const identity = apiKeyIdentitySchema.parse({
    key_id: newId('key'),
    tenant: tenantIdSchema.parse(input.tenant),
    principal: principalIdSchema.parse(input.principal),
    scopes: [...new Set(input.scopes)].sort(),
  });
  const key = `lhk_${randomBytes(32).toString('base64url')}`;
  await context.redis.hset(context.keys.apiKey(sha256Hex(key)), {
    key_id: identity.key_id,
    tenant: identity.tenant,
    principal: identity.principal,
    scopes: identity.scopes.join(' '),
    created_at: context.now(),
  });
  return { key, identity };
}

/** The identity behind a presented key, or undefined for any key not issued here. */
export async function resolveApiKey(
  context: RunStoreContext,
  presented: string,
): Promise<ApiKeyIdentity | undefined> {
  if (!presented.startsWith('lhk_') || presented.length > 128) return undefined;
  const fields = await context.redis.hgetall(context.keys.apiKey(sha256Hex(presented)));
  if (!fields.key_id) return undefined;
  return apiKeyIdentitySchema.parse({
    key_id: fields.key_id,
    tenant: fields.tenant,
    principal: fields.principal,
    scopes: (fields.scopes ?? '').split(' ').filter(Boolean),
  });
}
