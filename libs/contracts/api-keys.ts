import { z } from 'zod';
import { apiKeyIdentitySchema, principalIdSchema, tenantApiKeyScopeSchema } from './runs.js';

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

/** The answer to a creation: the only time the key itself is shown. */
export const createdApiKeySchema = apiKeyIdentitySchema.extend({
  key: z.string().startsWith('lhk_'),
});
export type CreatedApiKey = z.output<typeof createdApiKeySchema>;

/** A key as listed: who it speaks for and since when — never the key, never its hash. */
export const apiKeyViewSchema = apiKeyIdentitySchema.extend({
  created_at_ms: z.number().int().nonnegative(),
});
export type ApiKeyView = z.output<typeof apiKeyViewSchema>;
