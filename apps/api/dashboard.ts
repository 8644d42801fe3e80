import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { RunStore } from '../../libs/store/index.js';
import {
  type FailedAuthLimiter,
  markDoor,
  reshapeErrorAnswers,
  unavailableBody,
} from '../../libs/telemetry/index.js';
import { isRedisUnreachable } from '../../libs/telemetry/redis-link.js';
import type { RunsQueue } from '../../queues/index.js';
import { dashboardGate } from './auth.js';

/** Where Bull Board is served; a job's page is `${DASHBOARD_PATH}/queue/<queue>/<job id>`. */
export const DASHBOARD_PATH = '/admin/queues';

type BoardErrorHandler = Parameters<FastifyAdapter['setErrorHandler']>[0];

/** Bull Board's status type lists the statuses it sends itself; its adapter sends any status. */
const OUTAGE_ANSWER = {
  status: 503,
  body: unavailableBody(),
} as unknown as ReturnType<BoardErrorHandler>;

/**
 * Bull Board answers every error of its routes (its gate's included) with its own handler, as a
 * 500. An error because Redis did not answer is 503 `unavailable`, as the REST API
 * answers it, so a dashboard open during an outage says "retry", not "broken".
 */
class OutageAwareAdapter extends FastifyAdapter {
  override setErrorHandler(handler: BoardErrorHandler): this {
    return super.setErrorHandler((error) => (isRedisUnreachable(error) ? OUTAGE_ANSWER : handler(error)));
  }
}

/**
 * Bull Board at `/admin/queues`. Read-only: the dashboard shows the queue; runs change only through
 * the REST API. It shows every tenant's jobs, so it is behind the fleet operator scope (issue
 * 11.6), never a tenant's admin, with the key as a Bearer token or as a browser's Basic password.
 */
export async function registerDashboard(
  app: FastifyInstance,
  deps: { queue: RunsQueue; store: RunStore; authFailures: FailedAuthLimiter },
): Promise<void> {
  const board = new OutageAwareAdapter();
  createBullBoard({
    queues: [new BullMQAdapter(deps.queue, { readOnlyMode: true })],
    serverAdapter: board,
    options: { uiConfig: { boardTitle: 'Leasehold' } },
  });
  board.setBasePath(DASHBOARD_PATH);
  await app.register(async (dashboard) => {
    // Its own gate, never public; its own error answers rewritten to the one shape.
    markDoor(dashboard, 'own');
    reshapeErrorAnswers(dashboard);
    dashboard.addHook('onRequest', dashboardGate(deps.store, deps.authFailures));
    await dashboard.register(board.registerPlugin(), { prefix: DASHBOARD_PATH });
  });
}
