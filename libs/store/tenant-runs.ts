import { inputText, PAGE_LIMIT_MAX, type RunStatus, type RunView } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseRun } from './run-records.js';
import { slotBatch } from './slot-batch.js';

/**
 * A tenant's runs, newest first (`GET /v1/runs`): read from the tenant's index (a sorted
 * set by submission time, written before each run's own script), each member's record read and
 * filtered here. An index entry whose record is missing reads as absent; past
 * {@link PRUNE_AFTER_MS} it is removed (a run whose submission is still in flight is not).
 */

/** An index entry this old without its record is a submission that never landed, or an expired run. */
const PRUNE_AFTER_MS = 60_000;
/** Index entries read per round trip while a filtered page fills. */
const SCAN_BATCH = 200;
/**
 * A search reads each run's input, so it looks at no more than the tenant's newest this many runs
 * (the whole of the search's cost is bounded, however old the tenant or rare the text).
 */
export const SEARCH_WINDOW_RUNS = 10_000;

export interface TenantRunQuery {
  /** Any of these statuses (none given: every status). */
  statuses?: readonly RunStatus[];
  /**
   * A run id's beginning, or text its input holds (case aside); only the newest
   * `searchWindow` (default {@link SEARCH_WINDOW_RUNS}) of the tenant's runs are searched.
   */
  search?: string;
  searchWindow?: number;
  sessionId?: string;
  profileId?: string;
  /** Epoch ms, exclusive. */
  createdAfterMs?: number;
  /** Epoch ms, exclusive. */
  createdBeforeMs?: number;
  /** Where the page before ended (its `nextCursor`). */
  cursor?: TenantRunCursor;
  limit: number;
}

/** The last run of a page: its submission time and id (runs submitted in one ms order by id, descending). */
export interface TenantRunCursor {
  createdMs: number;
  runId: string;
}

export interface TenantRunPage {
  runs: RunView[];
  nextCursor: TenantRunCursor | null;
}

const CURSOR = /^(\d{1,16})\.([A-Za-z0-9_]{1,64})$/;

/** The cursor as the API shows it (`<created ms>.<run id>`), and back; undefined for anything else. */
export function formatRunCursor(cursor: TenantRunCursor): string {
  return `${cursor.createdMs}.${cursor.runId}`;
}
export function parseRunCursor(text: string): TenantRunCursor | undefined {
  const match = CURSOR.exec(text);
  return match?.[1] && match[2] ? { createdMs: Number(match[1]), runId: match[2] } : undefined;
}

function matches(run: RunView, query: TenantRunQuery): boolean {
  if (query.statuses?.length && !query.statuses.includes(run.status)) return false;
  if (query.search && !run.id.startsWith(query.search)) {
    if (!inputText(run.input).toLowerCase().includes(query.search.toLowerCase())) return false;
  }
  if (query.sessionId !== undefined && run.session_id !== query.sessionId) return false;
  if (query.profileId !== undefined && run.browser_profile_id !== query.profileId) return false;
  return true;
}

/**
 * One page of the tenant's runs. With a session filter, the session's own index is read instead of
 * the tenant's (the same scores: submission ms); each record's tenant is compared either way.
 */
export async function listTenantRuns(
  context: RunStoreContext,
  tenant: string,
  query: TenantRunQuery,
): Promise<TenantRunPage> {
  const { redis, keys } = context;
  if (!Number.isInteger(query.limit) || query.limit < 1 || query.limit > PAGE_LIMIT_MAX)
    throw new RangeError(`limit: expected 1 to ${PAGE_LIMIT_MAX}, got ${query.limit}`);
  const indexKey =
    query.sessionId !== undefined ? keys.sessionRuns(query.sessionId) : keys.tenantRuns(tenant);
  const tenantIndex = query.sessionId === undefined;
  const before = query.createdBeforeMs;
  const cursor = query.cursor;
  // The newest score a page may hold: below `created_before`, at most the cursor's.
  let max: string = before !== undefined ? `(${before}` : '+inf';
  if (cursor && (before === undefined || cursor.createdMs < before)) max = String(cursor.createdMs);
  let min = query.createdAfterMs !== undefined ? `(${query.createdAfterMs}` : '-inf';
  // A search ends at the oldest run of its window: nothing older is read.
  const floor = query.search ? await searchFloor(context, indexKey, query.searchWindow) : undefined;
  if (floor && (query.createdAfterMs === undefined || floor.createdMs > query.createdAfterMs))
    min = String(floor.createdMs);
  const withinWindow = (entry: TenantRunCursor) =>
    !floor || entry.createdMs > floor.createdMs || entry.runId >= floor.runId;
  const runs: RunView[] = [];
  let offset = 0;
  for (;;) {
    const flat = await redis.zrevrangebyscore(indexKey, max, min, 'WITHSCORES', 'LIMIT', offset, SCAN_BATCH);
    const batch: TenantRunCursor[] = [];
    for (let i = 0; i + 1 < flat.length; i += 2)
      batch.push({ runId: String(flat[i]), createdMs: Number(flat[i + 1]) });
    offset += batch.length;
    // Within one ms Redis orders by id, descending here: the cursor's own and those before it were read.
    const fresh = (
      cursor
        ? batch.filter((entry) => entry.createdMs < cursor.createdMs || entry.runId < cursor.runId)
        : batch
    ).filter(withinWindow);
    const pipeline = slotBatch(redis);
    for (const entry of fresh) pipeline.hgetall(keys.run(entry.runId));
    const replies = fresh.length > 0 ? ((await pipeline.exec()) ?? []) : [];
    const missing: string[] = [];
    for (const [index, entry] of fresh.entries()) {
      const fields = (replies[index]?.[1] ?? {}) as Record<string, string>;
      if (!fields.id) {
        if (entry.createdMs < context.now() - PRUNE_AFTER_MS) missing.push(entry.runId);
        continue;
      }
      if (fields.tenant !== tenant) continue;
      const run = parseRun(fields)?.run;
      if (!run || !matches(run, query)) continue;
      runs.push(run);
      if (runs.length === query.limit) {
        if (missing.length > 0 && tenantIndex) await redis.zrem(indexKey, ...missing);
        return { runs, nextCursor: { createdMs: entry.createdMs, runId: entry.runId } };
      }
    }
    if (missing.length > 0 && tenantIndex) {
      await redis.zrem(indexKey, ...missing);
      // The entries after them moved up by as many places.
      offset -= missing.length;
    }
    if (batch.length < SCAN_BATCH) return { runs, nextCursor: null };
  }
}

/**
 * The oldest index entry a search may read: the `window`-th newest (undefined when the index holds
 * fewer). Runs of its ms order by id, descending, so those after it by id are past the window too.
 */
async function searchFloor(
  context: RunStoreContext,
  indexKey: string,
  window = SEARCH_WINDOW_RUNS,
): Promise<TenantRunCursor | undefined> {
  const [runId, score] = await context.redis.zrevrange(indexKey, window - 1, window - 1, 'WITHSCORES');
  return runId === undefined ? undefined : { runId, createdMs: Number(score) };
}
