import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import {
  ApiError,
  PAGE_LIMIT_DEFAULT,
  PAGE_LIMIT_MAX,
  RUN_STATUSES,
  type RunStatus,
  recordIdSchema,
  runStatusSchema,
  stepPageSchema,
} from '../../../libs/contracts/index.js';
import { runPageSchema } from '../../../libs/contracts/rest-views.js';
import { formatRunCursor, parseRunCursor } from '../../../libs/store/index.js';
import { authenticate, identityOf } from '../auth.js';
import { answers } from './openapi.js';
import { idParams, typed, type V1Dependencies } from './shared.js';

/** Query values are taken as text and checked here, so a bad cursor or limit is a 400 in the one error shape. */
const pageQuery = { cursor: z.string().max(200).optional(), limit: z.string().max(10).optional() };

function pageLimit(text: string | undefined): number {
  if (text === undefined) return PAGE_LIMIT_DEFAULT;
  const limit = /^\d{1,3}$/.test(text) ? Number(text) : Number.NaN;
  if (!(limit >= 1 && limit <= PAGE_LIMIT_MAX))
    throw new ApiError(
      'bad_request',
      `limit: a whole number from 1 to ${PAGE_LIMIT_MAX}, got "${text.slice(0, 16)}"`,
    );
  return limit;
}

function epochMs(name: string, text: string | undefined): number | undefined {
  if (text === undefined) return undefined;
  if (!/^\d{1,16}$/.test(text))
    throw new ApiError('bad_request', `${name}: epoch milliseconds, got "${text.slice(0, 24)}"`);
  return Number(text);
}

/** `status`: one status or several, comma-separated (`failed,cancelled`). */
function statusList(text: string | undefined): RunStatus[] | undefined {
  if (text === undefined) return undefined;
  const statuses = text.split(',').map((status) => runStatusSchema.safeParse(status.trim()));
  if (statuses.some((status) => !status.success))
    throw new ApiError(
      'bad_request',
      `status: one or more of ${RUN_STATUSES.join(', ')}, comma-separated; got "${text.slice(0, 64)}"`,
    );
  return [...new Set(statuses.map((status) => status.data as RunStatus))];
}

/**
 * What runs did: the tenant's runs, newest first, and each run's steps — every model
 * turn and tool call, with arguments as recorded (secrets read `[secret]`). Another tenant's run is 404.
 */
export function registerRunStepRoutes(root: FastifyInstance, deps: V1Dependencies): void {
  const app = typed(root);
  const { store } = deps;

  app.get(
    '/v1/runs',
    {
      schema: {
        tags: ['runs'],
        operationId: 'listRuns',
        summary: "The tenant's runs, newest first, filtered; at most 100 a page",
        description:
          "A search reads each run's input, so it covers the tenant's newest 10,000 runs, not older ones.",
        querystring: z.object({
          ...pageQuery,
          status: z
            .string()
            .max(200)
            .optional()
            .describe('One status or several, comma-separated: `failed,cancelled`'),
          search: z
            .string()
            .min(1)
            .max(200)
            .optional()
            .describe(
              "A run id's beginning, or text of the run's input (case aside); searches the tenant's newest 10,000 runs",
            ),
          session_id: recordIdSchema.optional(),
          profile_id: z.string().max(128).optional(),
          created_after: z.string().max(20).optional(),
          created_before: z.string().max(20).optional(),
        }),
        response: answers({ 200: runPageSchema }, 400, 409, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const query = request.query;
      const limit = pageLimit(query.limit);
      const cursor = query.cursor === undefined ? undefined : parseRunCursor(query.cursor);
      if (query.cursor !== undefined && !cursor)
        throw new ApiError('bad_request', 'cursor: the next_cursor of an earlier page');
      const createdAfterMs = epochMs('created_after', query.created_after);
      const createdBeforeMs = epochMs('created_before', query.created_before);
      const statuses = statusList(query.status);
      const page = await store.listTenantRuns(tenant, {
        limit,
        ...(cursor ? { cursor } : {}),
        ...(statuses ? { statuses } : {}),
        ...(query.search ? { search: query.search } : {}),
        ...(query.session_id ? { sessionId: query.session_id } : {}),
        ...(query.profile_id ? { profileId: query.profile_id } : {}),
        ...(createdAfterMs !== undefined ? { createdAfterMs } : {}),
        ...(createdBeforeMs !== undefined ? { createdBeforeMs } : {}),
      });
      return { runs: page.runs, next_cursor: page.nextCursor ? formatRunCursor(page.nextCursor) : null };
    },
  );

  app.get(
    '/v1/runs/:id/steps',
    {
      schema: {
        tags: ['runs'],
        operationId: 'listRunSteps',
        summary: "The run's steps in the order they started: model turns and tool calls",
        params: idParams,
        querystring: z.object(pageQuery),
        response: answers({ 200: stepPageSchema }, 400, 404, 409, 422),
      },
      preHandler: authenticate(store, 'runs:read'),
    },
    async (request) => {
      const { tenant } = identityOf(request);
      const limit = pageLimit(request.query.limit);
      const cursor = request.query.cursor;
      if (cursor !== undefined && !/^\d{1,9}$/.test(cursor))
        throw new ApiError('bad_request', 'cursor: the next_cursor of an earlier page');
      const run = await store.getRun(request.params.id, tenant);
      if (!run) throw new ApiError('not_found', `run ${request.params.id} not found`);
      const page = await store.listSteps(run.id, cursor === undefined ? 0 : Number(cursor), limit);
      return { steps: page.steps, next_cursor: page.nextCursor };
    },
  );
}
