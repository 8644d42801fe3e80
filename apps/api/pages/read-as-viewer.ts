import type { FastifyInstance, FastifyRequest } from 'fastify';
import { PAGE_LIMIT_MAX, type RunStep } from '../../../libs/contracts/index.js';
import { RUN_LIST_FILTERS, type RunListFilters } from '../../../libs/ui/index.js';

/** A run page shows at most this many pages of steps (of {@link PAGE_LIMIT_MAX}); the API has the rest. */
const STEP_PAGES_SHOWN = 20;

export type ViewerRead<T> = { ok: true; body: T } | { ok: false; status: number; message: string };

/**
 * Reads a /v1 route as the signed-in person, through the server itself: the page sees exactly
 * what the API answers that person (the tenant check, scopes, rate limits), never more.
 */
export async function readAsViewer<T>(
  app: FastifyInstance,
  request: FastifyRequest,
  url: string,
): Promise<ViewerRead<T>> {
  const answer = await app.inject({ method: 'GET', url, headers: { cookie: request.headers.cookie ?? '' } });
  const body = answer.json();
  if (answer.statusCode === 200) return { ok: true, body: body as T };
  return {
    ok: false,
    status: answer.statusCode,
    message: body?.error?.message ?? `answered ${answer.statusCode}`,
  };
}

/**
 * The runs page's filters from its query: each set one trimmed, the statuses of its boxes joined
 * by commas; `untidy` when the query held a field left empty (the page then sends to its tidy address).
 */
export function runListFilters(query: Record<string, unknown>): { filters: RunListFilters; untidy: boolean } {
  const filters: RunListFilters = {};
  let untidy = false;
  for (const name of [...RUN_LIST_FILTERS, 'cursor', 'limit'] as const) {
    const given = query[name];
    const values = (Array.isArray(given) ? given : [given]).filter(
      (value): value is string => typeof value === 'string',
    );
    const set = values.map((value) => value.trim()).filter(Boolean);
    if (set.length < values.length) untidy = true;
    if (set.length > 0) filters[name] = name === 'status' ? set.join(',') : set[0];
  }
  return { filters, untidy };
}

/** `GET /v1/runs`'s query from the page's filters; a time a person typed becomes epoch ms. */
export function runListQuery(filters: RunListFilters): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (!value) continue;
    const isTime = name === 'created_after' || name === 'created_before';
    const asMs = isTime && !/^\d+$/.test(value) ? Date.parse(`${value}Z`) : Number.NaN;
    query.set(name, Number.isFinite(asMs) ? String(asMs) : value);
  }
  return query.toString();
}

/** The run's steps in order, page after page as the API gives them. */
export async function readStepsAsViewer(
  app: FastifyInstance,
  request: FastifyRequest,
  runId: string,
): Promise<ViewerRead<{ steps: RunStep[] }>> {
  const steps: RunStep[] = [];
  let cursor: string | null = null;
  for (let page = 0; page < STEP_PAGES_SHOWN; page += 1) {
    const query: URLSearchParams = new URLSearchParams({
      limit: String(PAGE_LIMIT_MAX),
      ...(cursor ? { cursor } : {}),
    });
    const read: ViewerRead<{ steps: RunStep[]; next_cursor: string | null }> = await readAsViewer<{
      steps: RunStep[];
      next_cursor: string | null;
    }>(app, request, `/v1/runs/${runId}/steps?${query.toString()}`);
    if (!read.ok) return read;
    steps.push(...read.body.steps);
    cursor = read.body.next_cursor;
    if (!cursor) break;
  }
  return { ok: true, body: { steps } };
}
