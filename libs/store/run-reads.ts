import { type RunStatus, type RunView, recordIdSchema } from '../contracts/index.js';
import { getSession } from './agents.js';
import type { RunStoreContext } from './run-keys.js';
import { parseRun, parseRunStatus } from './run-records.js';

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
 * The session's runs in submission order. The session's index is written before each run's
 * script, so an entry whose run was never written is skipped.
 */
export async function listRuns(
  context: RunStoreContext,
  tenant: string,
  sessionId: string,
): Promise<RunView[]> {
  if (!(await getSession(context, tenant, sessionId))) return [];
  const ids = await context.redis.zrange(context.keys.sessionRuns(sessionId), 0, -1);
  const runs = await Promise.all(ids.map((id) => getRun(context, id, tenant)));
  return runs.filter((run): run is RunView => run !== undefined);
}

/**
 * Whether the loop must stop before its next call: a cancel was asked, or the run is no longer
 * running (ended elsewhere: reclaimed, cancelled). One round trip, no record parsed.
 */
export async function stopRequested(context: RunStoreContext, runId: string): Promise<boolean> {
  const [status, cancel] = await context.redis.hmget(context.keys.run(runId), 'status', 'cancel_requested');
  return status !== 'running' || cancel === '1';
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
  const pipeline = context.redis.pipeline();
  for (const runId of runIds) pipeline.hmget(context.keys.run(runId), 'status', 'deadline_at');
  const replies = (await pipeline.exec()) ?? [];
  runIds.forEach((runId, index) => {
    const [status, deadline] = (replies[index]?.[1] ?? []) as Array<string | null>;
    const parsed = status ? parseRunStatus(status) : undefined;
    if (parsed) states.set(runId, { status: parsed, deadlineAtMs: Number(deadline) });
  });
  return states;
}
