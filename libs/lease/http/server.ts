import type { FastifyInstance } from 'fastify';
import {
  createHttpServer,
  type FailedAuthLimiter,
  guardDoors,
  type Logger,
  type ReadinessCheck,
  type Registry,
  registerOpsRoutes,
} from '../../telemetry/index.js';
import type { LeaseService, LeaseStore } from '../index.js';
import { registerDataPlaneRoutes } from './routes.js';
import { presentsToken } from './token.js';

/** JSON body ceiling of the data plane (DESIGN §5); a larger body is answered 413. */
export const DATA_PLANE_BODY_LIMIT_BYTES = 64 * 1024;

export interface DataPlaneServerOptions {
  logger: Logger;
  /** The shared data-plane token (at least 32 characters, checked by the configuration). */
  token: string;
  /** Counts failed authentications per address and answers 429 past the limit. */
  failures: FailedAuthLimiter;
  leases: LeaseService;
  store: LeaseStore;
  /** What `GET /v1/worker` tells about this worker. */
  worker: { id: string; pinnedProfiles: '*' | readonly string[]; browserVersion: string };
  metrics: Registry;
  readiness: () => ReadinessCheck[];
}

/**
 * The browser worker's HTTP server, not yet listening: the data-plane routes behind the token, the
 * worker's own description, and the public ops routes (`/healthz`, `/readyz`, `/metrics`).
 */
export function createDataPlaneServer(options: DataPlaneServerOptions): FastifyInstance {
  const { token } = options;
  const app = createHttpServer(options.logger, 'data-plane', DATA_PLANE_BODY_LIMIT_BYTES);
  // Issue 11.1: the token is demanded per route after routing (default-deny), never from the raw
  // URL, whose spelling the router forgives. Only the ops routes are public.
  guardDoors(app, {
    refusal: 'a valid data-plane token is required',
    challenge: 'Bearer',
    verify: async (request) => presentsToken(request, token),
    failures: options.failures,
  });
  registerDataPlaneRoutes(app, options.leases, options.store);
  const { worker } = options;
  app.get('/v1/worker', async () => ({
    id: worker.id,
    pinned_profiles: worker.pinnedProfiles,
    browser_version: worker.browserVersion,
  }));
  registerOpsRoutes(app, options.metrics, options.readiness);
  return app;
}
