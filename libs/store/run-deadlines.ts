import { ENDED_RUN_STATUSES, type RunStatus } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseApproval, parseRunStatus } from './run-records.js';

/**
 * The deadline index (DESIGN §4: the sweeper fails runs past their deadline): one sorted set of
 * run ids scored by `deadline_at` (epoch ms). It lives in its own slot, apart from each run's
 * `{run:ID}`, so it is written as a separate command *before* the script that sets the deadline:
 * a crash in between leaves an entry whose run reads as absent (or ended, or with a later
 * deadline), never a run without an entry. The sweep settles each entry against the run's record.
 */

/** One entry of the deadline index. */
export interface RunDeadline {
  runId: string;
  deadlineAtMs: number;
}

/** What expiring a run's stale approvals found. */
export interface StaleApprovals {
  /** The run's status, or undefined when its record is gone. */
  runStatus: RunStatus | undefined;
  /** Approvals moved `pending → expired` by this call. */
  expired: string[];
  /** How long each of those waited, from its request to its expiry (ms). */
  expiredWaitsMs: number[];
  /**
   * A parked run's `person` approval past its time: `timeout` (nobody took the page over: the run
   * fails `person_timeout`) or `handback` (the takeover's time is up: the page is handed back).
   */
  personDue?: { kind: 'timeout' | 'handback'; approvalId: string; holder: string };
}

const ENDED: ReadonlySet<string> = new Set(ENDED_RUN_STATUSES);

/** Submission: the run at its first deadline; an entry already there (a duplicate submission) is kept. */
export function indexSubmittedRun(
  pipeline: { zadd(key: string, mode: 'NX', score: number, member: string): unknown },
  keys: RunStoreContext['keys'],
  runId: string,
  deadlineAtMs: number,
): void {
  pipeline.zadd(keys.runDeadlines(), 'NX', deadlineAtMs, runId);
}

/**
 * Before a retry's script: the run at the deadline that script will set (`now + timeout_ms`, the
 * timeout pinned at submission), when the run can be retried by this tenant at all. Answers
 * whether it wrote, so a refused retry can put the entry back ({@link reindexFromRecord}).
 */
export async function indexRetriedRun(
  context: RunStoreContext,
  runId: string,
  tenant: string,
  nowMs: number,
): Promise<boolean> {
  const { redis, keys } = context;
  const [status, runTenant, timeoutMs] = await redis.hmget(keys.run(runId), 'status', 'tenant', 'timeout_ms');
  if (status !== 'failed' || runTenant !== tenant || !timeoutMs) return false;
  await redis.zadd(keys.runDeadlines(), nowMs + Number(timeoutMs), runId);
  return true;
}

/**
 * After a refused retry that wrote the index: the entry back at the deadline the record holds (a
 * concurrent retry's), so a live run is never indexed later than its deadline. An ended run's
 * entry is left for the sweep to remove.
 */
export async function reindexFromRecord(context: RunStoreContext, runId: string): Promise<void> {
  const { redis, keys } = context;
  const [status, deadlineAt] = await redis.hmget(keys.run(runId), 'status', 'deadline_at');
  if (!status || ENDED.has(status) || !deadlineAt) return;
  await redis.zadd(keys.runDeadlines(), Number(deadlineAt), runId);
}

/** Entries due by the store's clock (deadline ≤ now), earliest first, at most `limit`. */
export async function listDueRunDeadlines(context: RunStoreContext, limit: number): Promise<RunDeadline[]> {
  if (!Number.isInteger(limit) || limit < 1)
    throw new RangeError(`limit: expected a positive integer, got ${limit}`);
  const flat = await context.redis.zrangebyscore(
    context.keys.runDeadlines(),
    '-inf',
    context.now(),
    'WITHSCORES',
    'LIMIT',
    0,
    limit,
  );
  return pairs(flat).map(([runId, score]) => ({ runId, deadlineAtMs: Number(score) }));
}

/** Moves an entry to `toMs`, or removes it (`toMs` undefined), if it still carries `fromMs`. */
export async function settleRunDeadline(
  context: RunStoreContext,
  runId: string,
  fromMs: number,
  toMs: number | undefined,
): Promise<boolean> {
  const moved = await context.redis.settleRunDeadline(context.keys.runDeadlines(), runId, fromMs, toMs ?? '');
  return moved === 1;
}

/**
 * One ZSCAN step over the whole index (due or not): every entry present for a full cycle (from
 * cursor '0' back to '0') is returned at least once. `count` is Redis's hint: a small index comes
 * back whole.
 */
export async function scanRunDeadlines(
  context: RunStoreContext,
  cursor: string,
  count: number,
): Promise<{ cursor: string; runIds: string[] }> {
  const [next, flat] = await context.redis.zscan(context.keys.runDeadlines(), cursor, 'COUNT', count);
  return { cursor: next, runIds: pairs(flat).map(([runId]) => runId) };
}

/**
 * Expires the pending approvals of a run no longer parked on them, in the run's slot, then drops
 * every approval of the run that is no longer pending from its tenant's pending index.
 */
export async function expireStaleApprovals(context: RunStoreContext, runId: string): Promise<StaleApprovals> {
  const { redis, keys } = context;
  const [status, tenant, expired, settled, due] = await redis.expireStaleApprovals(
    keys.run(runId),
    keys.approvals(runId),
    context.now(),
  );
  if (tenant && settled.length > 0) await redis.zrem(keys.tenantApprovals(tenant), ...settled);
  // Read back only when some expired (rare): the approvals' request and expiry times.
  const records = expired.length > 0 ? await redis.hmget(keys.approvals(runId), ...expired) : [];
  const expiredWaitsMs = records.flatMap((json) => {
    const approval = json ? parseApproval(json) : undefined;
    return approval?.decided_at_ms != null ? [approval.decided_at_ms - approval.created_at_ms] : [];
  });
  const [dueKind, dueApproval, dueHolder] = due ?? [];
  return {
    runStatus: parseRunStatus(status),
    expired,
    expiredWaitsMs,
    ...((dueKind === 'timeout' || dueKind === 'handback') && dueApproval
      ? { personDue: { kind: dueKind, approvalId: dueApproval, holder: dueHolder ?? '' } }
      : {}),
  };
}

/** `[member, score, member, score…]` → pairs. */
function pairs(flat: string[]): Array<[string, string]> {
  const result: Array<[string, string]> = [];
  for (let i = 0; i + 1 < flat.length; i += 2) result.push([flat[i] as string, flat[i + 1] as string]);
  return result;
}
