import type { FastifyInstance } from 'fastify';
import { BROWSER_TOOLS_COMPATIBLE_VERSIONS, BROWSER_TOOLS_CONTRACT_VERSION } from '../../contracts/index.js';
import type { EgressGuard } from '../../egress/index.js';
import {
  createHttpServer,
  type FailedAuthLimiter,
  guardDoors,
  type Logger,
  type ReadinessCheck,
  type Registry,
  registerOpsRoutes,
} from '../../telemetry/index.js';
import { DataPlaneError, type LeaseService, type LeaseStore } from '../index.js';
import { dataPlaneOpenApiDocument } from './openapi.js';
import { refuseUndocumentedRoutes, registerOperation } from './route-registration.js';
import { BROWSER_TOOLS_HEADER, DATA_PLANE_OPERATIONS } from './route-table.js';
import { registerDataPlaneRoutes } from './routes.js';
import { presentsToken } from './token.js';

export { BROWSER_TOOLS_HEADER };

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
  /** False where another server of this process serves the registry (the fleet's API): `/metrics` answers 404. */
  serveMetrics?: boolean;
  readiness: () => ReadinessCheck[];
  /** Whether this worker's own Redis connections answer (`/readyz`); the process's link by default. */
  redisUp?: () => boolean;
  /** DESIGN §12: judges a new profile's literal origins; absent, they are not judged here. */
  egress?: EgressGuard;
}

/**
 * The browser worker's HTTP server, not yet listening: the data-plane routes behind the token, the
 * worker's own description, its OpenAPI document (`/docs/json`, behind the token too), and the
 * public ops routes (`/healthz`, `/readyz`, `/metrics`). Every route is in the document: one that is
 * not stops the server at start-up.
 */
export function createDataPlaneServer(options: DataPlaneServerOptions): FastifyInstance {
  const { token } = options;
  const app = createHttpServer(options.logger, 'data-plane', DATA_PLANE_BODY_LIMIT_BYTES);
  refuseUndocumentedRoutes(app);
  // The token is demanded per route after routing (default-deny), never from the raw
  // URL, whose spelling the router forgives. Only the ops routes are public.
  guardDoors(app, {
    refusal: 'a valid data-plane token is required',
    challenge: 'Bearer',
    verify: async (request) => presentsToken(request, token),
    failures: options.failures,
  });
  refuseUnknownContracts(app);
  registerDataPlaneRoutes(app, options.leases, options.store, options.egress);
  const { worker } = options;
  registerOperation(app, DATA_PLANE_OPERATIONS.getWorker, async () => ({
    id: worker.id,
    pinned_profiles: worker.pinnedProfiles,
    browser_version: worker.browserVersion,
    // The contract this worker's page routes speak, and the earlier ones it still takes.
    browser_tools_contract: BROWSER_TOOLS_CONTRACT_VERSION,
    browser_tools_compatible: BROWSER_TOOLS_COMPATIBLE_VERSIONS,
  }));
  // Built once: the document describes the code, not this worker.
  const document = dataPlaneOpenApiDocument();
  registerOperation(app, DATA_PLANE_OPERATIONS.getDataPlaneDocument, async () => document);
  registerOpsRoutes(app, options.metrics, options.readiness, {
    serveMetrics: options.serveMetrics !== false,
    ...(options.redisUp ? { redisUp: options.redisUp } : {}),
  });
  return app;
}

/**
 * A caller that names a browser tools contract this worker does not take is refused
 * before anything is done (after the token check, which runs on request); one that names a
 * compatible version (1.2.0: its arguments are a subset) is served as any other.
 */
function refuseUnknownContracts(app: FastifyInstance): void {
  const taken: readonly string[] = BROWSER_TOOLS_COMPATIBLE_VERSIONS;
  app.addHook('preHandler', async (request) => {
    const spoken = request.headers[BROWSER_TOOLS_HEADER];
    if (spoken === undefined || (typeof spoken === 'string' && taken.includes(spoken))) return;
    throw new DataPlaneError(
      'invalid_arguments',
      `${BROWSER_TOOLS_HEADER}: this worker speaks browser tools contract ${BROWSER_TOOLS_CONTRACT_VERSION} and takes ${taken.join(', ')}; the caller named ${JSON.stringify(String(spoken).slice(0, 32))}`,
      { field: BROWSER_TOOLS_HEADER },
    );
  });
}
