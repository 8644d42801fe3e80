import { type ApprovalView, type RunStatus, type RunView, recordIdSchema } from '../contracts/index.js';
import { getSession } from './agents.js';
import { approvalsInOrder } from './approvals.js';
import type { RunStoreContext } from './run-keys.js';
import { parseRun, parseRunStatus } from './run-records.js';
import { notesOf, withCardScreenshots } from './screenshot-states.js';
import { slotBatch } from './slot-batch.js';

/** The run, or undefined; with `tenant`, another tenant's run reads as absent. */
export async function getRun(
  context: RunStoreContext,
  runId: string,
  tenant?: string,
): Promise<RunView | undefined> {
  if (!recordIdSchema.safeParse(runId).success) return undefined;
  const fields = await context.redis.hgetall(context.keys.run(runId));
  // The tenant is compared on the raw record first: another tenant's run reads as absent even
  // when it could not be parsed (`record_unreadable` would tell them it exists).
  if (tenant !== undefined && fields.tenant !== tenant) return undefined;
  return parseRun(fields)?.run;
}

/**
 * A run of the tenant with its pending approvals, read in one transaction: both keys are the run's
 * (one slot), so the two are of one moment. Read apart, a park between the reads answered a run
 * `running` with an approval pending (CI, stop 24: MCP's wait_for_run stopped on it).
 */
export async function getRunDetail(
  context: RunStoreContext,
  runId: string,
  tenant: string,
): Promise<{ run: RunView; pendingApprovals: ApprovalView[] } | undefined> {
  if (!recordIdSchema.safeParse(runId).success) return undefined;
  const replies = await context.redis
    .multi()
    .hgetall(context.keys.run(runId))
    .hvals(context.keys.approvals(runId))
    .hgetall(context.keys.screenshots(runId))
    .exec();
  const [fieldsReply, approvalsReply, notesReply] = replies ?? [];
  if (fieldsReply?.[0]) throw fieldsReply[0];
  if (approvalsReply?.[0]) throw approvalsReply[0];
  const fields = fieldsReply?.[1] as Record<string, string>;
  if (fields.tenant !== tenant) return undefined;
  const run = parseRun(fields)?.run;
  if (!run) return undefined;
  const pendingApprovals = withCardScreenshots(
    approvalsInOrder(approvalsReply?.[1] as string[]).filter((approval) => approval.status === 'pending'),
    notesOf(notesReply?.[1] as Record<string, string> | undefined),
  );
  return { run, pendingApprovals };
}

/** How long an index entry without its run may be a submission still in flight, in ms. */
const SUBMISSION_IN_FLIGHT_MS = 60_000;

/**
 * The session's runs in submission order. The session's index is written before each run's
 * script, so an entry whose run was never written is skipped. An entry older than a submission in
 * flight whose run is gone (expired with its retention) is removed as it is met, so the
 * index does not keep the run forever.
 */
export async function listRuns(
  context: RunStoreContext,
  tenant: string,
  sessionId: string,
): Promise<RunView[]> {
  if (!(await getSession(context, tenant, sessionId))) return [];
  const indexKey = context.keys.sessionRuns(sessionId);
  const flat = await context.redis.zrange(indexKey, 0, -1, 'WITHSCORES');
  const entries: Array<{ id: string; submittedAtMs: number }> = [];
  for (let i = 0; i + 1 < flat.length; i += 2)
    entries.push({ id: flat[i] as string, submittedAtMs: Number(flat[i + 1]) });
  const runs = await Promise.all(entries.map((entry) => getRun(context, entry.id, tenant)));
  const settledBeforeMs = context.now() - SUBMISSION_IN_FLIGHT_MS;
  const gone = entries.filter((entry, i) => !runs[i] && entry.submittedAtMs < settledBeforeMs);
  if (gone.length > 0) {
    // A run of the tenant's own session that is unreadable still exists: only absent records go.
    const exists = await Promise.all(gone.map((entry) => context.redis.exists(context.keys.run(entry.id))));
    const absent = gone.filter((_, i) => exists[i] === 0).map((entry) => entry.id);
    if (absent.length > 0) await context.redis.zrem(indexKey, ...absent);
  }
  return runs.filter((run): run is RunView => run !== undefined);
}

/**
 * Whether the loop must stop before its next call: a cancel was asked, or the run is no longer
 * running (ended elsewhere: reclaimed, cancelled). One round trip, no record parsed.
 */
export async function stopRequested(context: RunStoreContext, runId: string): Promise<boolean> {
  return (await interruptions(context, runId)).stop;
}

/**
 * What a running run's loop obeys at its safe points, in one read: a stop (cancelled, or no longer
 * running), and the holder of a takeover asked of it.
 */
export async function interruptions(
  context: RunStoreContext,
  runId: string,
): Promise<{ stop: boolean; takeoverBy: string | undefined }> {
  const [status, cancel, request] = await context.redis.hmget(
    context.keys.run(runId),
    'status',
    'cancel_requested',
    'person_request',
  );
  const holder = request ? (JSON.parse(request) as { holder?: unknown }).holder : undefined;
  return {
    stop: status !== 'running' || cancel === '1',
    takeoverBy: typeof holder === 'string' ? holder : undefined,
  };
}

/**
 * Status and deadline of many runs in one pipelined round trip (the lease upkeep's read); a run
 * that does not exist is absent from the map.
 */
export async function runStates(
  context: RunStoreContext,
  runIds: readonly string[],
): Promise<Map<string, { status: RunStatus; deadlineAtMs: number }>> {
  const states = new Map<string, { status: RunStatus; deadlineAtMs: number }>();
  if (runIds.length === 0) return states;
  const pipeline = slotBatch(context.redis);
  for (const runId of runIds) pipeline.hmget(context.keys.run(runId), 'status', 'deadline_at');
  const replies = (await pipeline.exec()) ?? [];
  runIds.forEach((runId, index) => {
    const [status, deadline] = (replies[index]?.[1] ?? []) as Array<string | null>;
    const parsed = status ? parseRunStatus(status) : undefined;
    if (parsed) states.set(runId, { status: parsed, deadlineAtMs: Number(deadline) });
  });
  return states;
}
