import type { FastifyInstance, FastifyRequest } from 'fastify';
import { tenantIdSchema } from '../../libs/contracts/index.js';
import { logTenantOf } from '../../libs/telemetry/index.js';

/**
 * A data-plane request's line names its tenant once it is authenticated. The data plane
 * authenticates a fleet token, not a tenant; every route names the tenant it acts for in its path
 * (`/v1/tenants/:tenant/…`), so that is the tenant, told only for a request the token let in (this
 * hook runs after the doors' credential check, which ends a refused request before it) and only
 * when it is a well-formed tenant id.
 */
export function logDataPlaneTenant(app: FastifyInstance): void {
  const admitted = new WeakSet<FastifyRequest>();
  app.addHook('onRequest', async (request) => {
    admitted.add(request);
  });
  logTenantOf(app, (request) => {
    if (!admitted.has(request)) return undefined;
    const parsed = tenantIdSchema.safeParse((request.params as { tenant?: unknown } | undefined)?.tenant);
    return parsed.success ? parsed.data : undefined;
  });
}
