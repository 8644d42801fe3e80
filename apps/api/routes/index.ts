import type { FastifyInstance, RouteOptions } from 'fastify';
import pino from 'pino';
import type { RunStore } from '../../../libs/store/index.js';
import type { FailedAuthLimiter } from '../../../libs/telemetry/index.js';
import { guardDoors } from '../../../libs/telemetry/index.js';
import { apiKeyDoors } from '../auth.js';
import { createRestServer } from '../rest-server.js';
import { registerAgentRoutes } from './agents.js';
import { registerApiKeyRoutes } from './api-keys.js';
import { registerApprovalRoutes } from './approvals.js';
import { registerArtifactRoutes } from './artifacts.js';
import { registerFileRoutes } from './files.js';
import { registerLiveRoutes } from './live.js';
import { registerPersonControlRoutes } from './person-control.js';
import { registerProfileSignInRoutes } from './profile-sign-ins.js';
import { registerProfileRoutes } from './profiles.js';
import { registerRunFileRoutes } from './run-files.js';
import { registerRunStepRoutes } from './run-steps.js';
import { registerRunRoutes } from './runs.js';
import { registerScheduleRoutes } from './schedules.js';
import { registerSessionRoutes } from './sessions.js';
import type { V1Dependencies } from './shared.js';
import { registerTenantEventRoutes } from './tenant-events.js';
import { registerWebhookRoutes } from './webhooks.js';

export type { V1Dependencies } from './shared.js';

/**
 * REST v1 (DESIGN §9): profiles, agents and models, sessions, runs, approvals, API keys; one file
 * per resource. Another tenant's record is 404. Registered in this order, which is the order of
 * the OpenAPI document's paths.
 */
export function registerV1Routes(app: FastifyInstance, deps: V1Dependencies): void {
  registerProfileRoutes(app, deps);
  registerAgentRoutes(app, deps);
  registerSessionRoutes(app, deps);
  registerRunRoutes(app, deps);
  registerTenantEventRoutes(app, deps);
  registerPersonControlRoutes(app, deps);
  registerRunStepRoutes(app, deps);
  registerLiveRoutes(app, deps);
  registerProfileSignInRoutes(app, deps);
  registerArtifactRoutes(app, deps);
  registerRunFileRoutes(app, deps);
  registerFileRoutes(app, deps);
  registerApprovalRoutes(app, deps);
  registerApiKeyRoutes(app, deps);
  registerWebhookRoutes(app, deps);
  registerScheduleRoutes(app, deps);
}

/**
 * The REST API's OpenAPI document without Redis or a listening socket: the same server
 * and routes over dependencies that are never called (documenting a route runs none of its code).
 * `onRoute` sees each route as it is registered (the document's test checks none is left out).
 */
export async function restApiDocument(
  options: { onRoute?: (route: RouteOptions) => void } = {},
): Promise<Record<string, unknown>> {
  const app = await createRestServer(pino({ level: 'silent' }));
  try {
    if (options.onRoute) app.addHook('onRoute', options.onRoute);
    const unused = {} as RunStore;
    guardDoors(app, apiKeyDoors(unused, {} as FailedAuthLimiter));
    registerV1Routes(app, { store: unused } as V1Dependencies);
    await app.ready();
    return app.swagger() as unknown as Record<string, unknown>;
  } finally {
    await app.close();
  }
}
