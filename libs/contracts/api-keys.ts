import { z } from 'zod';
import { recordIdSchema } from './ids.js';
import {
  type ApiKeyIdentity,
  type ApiKeyScope,
  apiKeyIdentitySchema,
  OPERATOR_SCOPE,
  principalIdSchema,
  tenantApiKeyScopeSchema,
} from './runs.js';

/**
 * API key administration (DESIGN §3): what an admin asks for, what it is shown once, and what a
 * listing shows. A key is stored as its SHA-256 only; neither the key nor its hash is ever listed.
 */

/**
 * `POST /v1/api-keys`: the key is always issued in the caller's own tenant, so no tenant is named,
 * and with tenant scopes only: the fleet's `operator` scope is made by `npm run api-key` alone.
 */
export const createApiKeyRequestSchema = z.strictObject({
  principal: principalIdSchema,
  scopes: z.array(tenantApiKeyScopeSchema).min(1).max(8),
});
export type CreateApiKeyRequest = z.output<typeof createApiKeyRequestSchema>;

/**
 * The key that made a key over REST, or null for one made by the operator (`npm run api-key`, the
 * fleet's start-up keys): who may decide an approval depends on it (see {@link inCreationChain}).
 */
const createdBySchema = recordIdSchema.nullable();

/** The answer to a creation: the only time the key itself is shown. */
export const createdApiKeySchema = apiKeyIdentitySchema.extend({
  key: z.string().startsWith('lhk_'),
  created_by: createdBySchema,
});
export type CreatedApiKey = z.output<typeof createdApiKeySchema>;

/** A key as listed: who it speaks for, since when and who made it — never the key, never its hash. */
export const apiKeyViewSchema = apiKeyIdentitySchema.extend({
  created_at_ms: z.number().int().nonnegative(),
  created_by: createdBySchema,
});
export type ApiKeyView = z.output<typeof apiKeyViewSchema>;

/**
 * How many keys deep a creation chain may go: a key whose chain holds this many makers creates no
 * key. Each key keeps its whole chain (so a revoked link cannot hide it); without a bound, keys made
 * and revoked in turn would grow that record without end. Operator → admin → bot is three.
 */
export const API_KEY_CHAIN_MAX = 16;

/** A key's place in its tenant's creation chains: its id, and its makers, the operator's first. */
export interface KeyLineage {
  keyId: string;
  /** Every key that made this one, transitively: the first made by the operator, the last its maker. */
  makers: readonly string[];
}

/**
 * True when `approver` is `driver`, one of its makers (it created the driver, transitively) or one
 * of the keys it made (transitively): a key an agent holding the driver could have had in hand.
 * Two keys the same maker made (siblings) are outside each other's chain.
 */
export function inCreationChain(approver: KeyLineage, driver: KeyLineage): boolean {
  return (
    approver.keyId === driver.keyId ||
    driver.makers.includes(approver.keyId) ||
    approver.makers.includes(driver.keyId)
  );
}

/**
 * The scopes of `requested` a key with `held` does not hold: `admin` holds every tenant scope, as
 * the API's scope checks read it, and nothing holds `operator` but itself.
 */
export function scopesNotHeld(
  held: ApiKeyIdentity['scopes'],
  requested: readonly ApiKeyScope[],
): ApiKeyScope[] {
  const admin = held.includes('admin');
  return requested.filter((scope) => !held.includes(scope) && !(admin && scope !== OPERATOR_SCOPE));
}
