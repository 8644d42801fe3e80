import {
  type ApprovalCard,
  type ApprovalView,
  GRANT_MAX_ACTIONS,
  GRANT_MAX_DURATION_MS,
  type GrantRequest,
  type GrantView,
  newId,
  recordIdSchema,
} from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseApproval, parseGrant } from './run-records.js';
import { runScriptKeys } from './run-retention.js';
import {
  isRefusalCode,
  type RunRefusal,
  type RunTransition,
  refusal,
  toTransition,
} from './run-transition.js';
import { notesOf, withCardScreenshots } from './screenshot-states.js';
import { slotBatch } from './slot-batch.js';

/**
 * Approvals and task grants (DESIGN §3, §4.4). An approval lives with its run (`{run:ID}`), so
 * asking for it parks the run and deciding it re-queues the run in one script each. A pointer
 * `{apr:ID}:run` finds the run from the approval id alone, and a per-tenant index lists them.
 */

export interface ApprovalRequest {
  invocationId: string;
  tool: string;
  arguments: unknown;
  /** What the person deciding sees (element, action, page, outlined screenshot). */
  card?: ApprovalCard | null;
  /**
   * A `person` approval: why, until when a person may come, and — when a takeover made it — who
   * holds the page, since and until when. Absent for an action's approval.
   */
  person?: {
    reason: string;
    expires_at_ms: number;
    holder?: string;
    since_ms?: number;
    until_ms?: number;
    start_url?: string | null;
  };
}

export type ApprovalDecision =
  | RunTransition<'requeued' | 'decided'>
  | {
      ok: false;
      code: 'already_decided' | 'grant_out_of_bounds' | 'person_in_control' | 'person_not_in_control';
      status: undefined;
      message: string;
    };

/** A hand-back: the holder giving the page back, and what the data plane counted of their time. */
export interface HandBack {
  holder: string;
  account: { ended_at_ms: number; inputs: number | null; end_url: string | null };
}

export type GrantUse =
  | { ok: true; grantId: string; usedActions: number; maxActions: number; expiresAtMs: number }
  | { ok: false; code: 'no_live_grant'; status: undefined; message: string }
  | RunRefusal;

export async function requestApproval(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  request: ApprovalRequest,
): Promise<{ approvalId: string; transition: RunTransition<'parked' | 'cancelled'> }> {
  const { redis, keys } = context;
  const approvalId = newId('apr');
  // A run's tenant never changes, nor its deadline and attempt while it runs, so reading them
  // ahead of the script cannot go stale.
  const [tenant, deadlineAt, attempt] = await redis.hmget(
    keys.run(runId),
    'tenant',
    'deadline_at',
    'attempt',
  );
  if (!tenant) return { approvalId, transition: refusal(runId, 'not_found', '', 'running') };
  const now = context.now();
  // The pointer sits outside the run's slot, so the run's end cannot expire it; the run
  // ends by its deadline at the latest (the sweeper fails it there), so the pointer lives that long
  // and the retention after it.
  const pointerTtlMs = Math.max(0, Number(deadlineAt) - now || 0) + context.retentionMs;
  // Pointer and index first: a crash before the script leaves entries that read as absent. They
  // sit in different slots, so they are a pipeline, not a transaction.
  failOnError(
    await slotBatch(redis)
      .set(keys.approvalRun(approvalId), runId, 'PX', pointerTtlMs)
      .zadd(keys.tenantApprovals(tenant), now, approvalId)
      .exec(),
  );
  // A run whose cancel was requested ends here, so the script holds every key it owns.
  const reply = await redis.createApproval(
    ...(await runScriptKeys(
      context,
      runId,
      [keys.run(runId), keys.events(runId), keys.approvals(runId)],
      Number(attempt) || 1,
    )),
    ownerToken,
    approvalId,
    request.invocationId,
    request.tool,
    JSON.stringify(request.arguments ?? null),
    now,
    context.retentionMs,
    JSON.stringify(request.card ?? null),
    request.person ? JSON.stringify(request.person) : '',
  );
  const transition = toTransition<'parked' | 'cancelled'>(runId, reply, 'running');
  if (!transition.ok) {
    await slotBatch(redis)
      .del(keys.approvalRun(approvalId))
      .zrem(keys.tenantApprovals(tenant), approvalId)
      .exec();
  }
  return { approvalId, transition };
}

function failOnError(replies: Array<[Error | null, unknown]> | null): void {
  const failed = replies?.find(([error]) => error !== null);
  if (failed?.[0]) throw failed[0];
}

async function runOfApproval(context: RunStoreContext, approvalId: string): Promise<string | undefined> {
  if (!recordIdSchema.safeParse(approvalId).success) return undefined;
  return (await context.redis.get(context.keys.approvalRun(approvalId))) ?? undefined;
}

export async function getApproval(
  context: RunStoreContext,
  tenant: string,
  approvalId: string,
): Promise<ApprovalView | undefined> {
  const runId = await runOfApproval(context, approvalId);
  if (!runId) return undefined;
  const json = await context.redis.hget(context.keys.approvals(runId), approvalId);
  if (json === null) return undefined;
  const approval = parseApproval(json);
  if (approval.tenant !== tenant) return undefined;
  return (await withNotedCards(context, [approval]))[0];
}

/**
 * The approvals with their cards' screenshots as noted (`withCardScreenshots`): an approval's
 * preview is taken beside its write, so every read of an approval says whether the picture is
 * pending, stored or failed, or a page would show a picture that does not exist yet. One read of
 * the notes per run.
 */
export async function withNotedCards(
  context: RunStoreContext,
  approvals: ApprovalView[],
): Promise<ApprovalView[]> {
  const runIds = [...new Set(approvals.filter((approval) => approval.card?.screenshot).map((a) => a.run_id))];
  if (runIds.length === 0) return approvals;
  const reads = slotBatch(context.redis);
  for (const runId of runIds) reads.hgetall(context.keys.screenshots(runId));
  const replies = (await reads.exec()) ?? [];
  const notes = new Map(
    runIds.map((runId, i) => [runId, notesOf(replies[i]?.[1] as Record<string, string> | undefined)]),
  );
  return approvals.map((approval) => {
    const noted = notes.get(approval.run_id);
    return noted ? (withCardScreenshots([approval], noted)[0] ?? approval) : approval;
  });
}

/** Every approval of one run, oldest first. */
export async function listRunApprovals(context: RunStoreContext, runId: string): Promise<ApprovalView[]> {
  return approvalsInOrder(await context.redis.hvals(context.keys.approvals(runId)));
}

/** A run's approvals as stored (the values of its approvals hash), oldest first. */
export function approvalsInOrder(values: readonly string[]): ApprovalView[] {
  return values
    .map(parseApproval)
    .sort((a, b) => a.created_at_ms - b.created_at_ms || a.id.localeCompare(b.id));
}

/** The tenant's pending approvals, oldest first; decided ones leave the index as they are met. */
export async function listTenantPendingApprovals(
  context: RunStoreContext,
  tenant: string,
): Promise<ApprovalView[]> {
  const { redis, keys } = context;
  const ids = await redis.zrange(keys.tenantApprovals(tenant), 0, -1);
  if (ids.length === 0) return [];
  // One slot per key (Redis Cluster): pipelined GETs, not MGET.
  const pointers = slotBatch(redis);
  for (const id of ids) pointers.get(keys.approvalRun(id));
  const runIds = ((await pointers.exec()) ?? []).map(([, value]) =>
    typeof value === 'string' ? value : undefined,
  );
  const pending: ApprovalView[] = [];
  const decided: string[] = [];
  const lookup = slotBatch(redis);
  for (const [i, id] of ids.entries()) lookup.hget(keys.approvals(runIds[i] ?? ''), id);
  const replies = (await lookup.exec()) ?? [];
  for (const [i, id] of ids.entries()) {
    // A member whose pointer expired (retention) names nothing any more. The pointer is
    // written before the member, so a missing one is never an approval still being requested.
    if (!runIds[i]) decided.push(id);
    const json = runIds[i] ? replies[i]?.[1] : null;
    if (typeof json !== 'string') continue;
    const approval = parseApproval(json);
    if (approval.tenant !== tenant) continue;
    if (approval.status === 'pending') pending.push(approval);
    else decided.push(id);
  }
  if (decided.length > 0) await redis.zrem(keys.tenantApprovals(tenant), ...decided);
  return withNotedCards(context, pending);
}

/**
 * Who decides: `by` names them. With `ownRunsOnly`, only an approval of a run `by` itself submitted
 * is found (an act waits for its owner's approval); another principal's reads as
 * absent, the same answer as another tenant's.
 */
export interface ApprovalDecider {
  by: string;
  ownRunsOnly?: boolean;
}

/**
 * An approval absent, of another tenant, or of a run its decider may not decide (another
 * principal's): one answer for all, naming the approval asked for and nothing of its run.
 */
function approvalNotFound(approvalId: string): RunRefusal {
  return { ok: false, code: 'not_found', status: undefined, message: `approval ${approvalId} not found` };
}

/**
 * Approves (optionally with a task grant) or denies. Re-queues the parked run when it was its last
 * pending approval; the caller then enqueues the run's new execution.
 */
export async function decideApproval(
  context: RunStoreContext,
  tenant: string,
  approvalId: string,
  decision:
    | ({ approved: true; grant?: GrantRequest; handBack?: HandBack } & ApprovalDecider)
    | ({ approved: false; reason: string } & ApprovalDecider),
): Promise<ApprovalDecision> {
  const runId = await runOfApproval(context, approvalId);
  if (!runId) return approvalNotFound(approvalId);
  const grant = decision.approved ? decision.grant : undefined;
  const handBack = decision.approved ? decision.handBack : undefined;
  const grantId = grant ? approvalId.replace(/^apr_/, 'grt_') : '';
  const reply = await context.redis.decideApproval(
    context.keys.run(runId),
    context.keys.events(runId),
    context.keys.approvals(runId),
    context.keys.grants(runId),
    approvalId,
    decision.approved ? 'approved' : 'denied',
    tenant,
    decision.by,
    decision.approved ? '' : decision.reason,
    context.now(),
    grantId,
    grant?.duration_ms ?? 0,
    grant?.max_actions ?? 0,
    GRANT_MAX_DURATION_MS,
    GRANT_MAX_ACTIONS,
    decision.ownRunsOnly ? decision.by : '',
    handBack?.holder ?? '',
    handBack ? JSON.stringify(handBack.account) : '',
  );
  const [code, detail] = reply;
  if (code === 'person_in_control') {
    return { ok: false, code, status: undefined, message: `a person holds this run's page (${detail})` };
  }
  if (code === 'person_not_in_control') {
    return { ok: false, code, status: undefined, message: 'you hold no takeover of this run' };
  }
  if (code === 'already_decided') {
    return { ok: false, code, status: undefined, message: `approval ${approvalId} is already ${detail}` };
  }
  if (code === 'grant_out_of_bounds') {
    return {
      ok: false,
      code,
      status: undefined,
      message: `a grant is at most ${GRANT_MAX_DURATION_MS / 60_000} minutes and ${GRANT_MAX_ACTIONS} actions`,
    };
  }
  if (code === 'not_found') return approvalNotFound(approvalId);
  return toTransition<'requeued' | 'decided'>(runId, reply, 'parked');
}

/** Uses one action of a live grant of the run, by its owner; refused once expired by time or count. */
/**
 * The name a grant's `charged` set keeps an invocation under: its id without the run's, which the
 * grant (kept with its run) says already (`redis_bytes_per_run`). A grant charged under
 * full ids before reads as uncharged for calls it charged; at worst such a call is charged again.
 */
function chargedName(runId: string, invocationId: string): string {
  return invocationId.startsWith(`${runId}-`) ? invocationId.slice(runId.length + 1) : invocationId;
}

export async function consumeGrant(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  invocationId: string,
): Promise<GrantUse> {
  const [code, detail, values] = await context.redis.consumeGrant(
    context.keys.run(runId),
    context.keys.events(runId),
    context.keys.grants(runId),
    ownerToken,
    context.now(),
    chargedName(runId, invocationId),
  );
  if (code === 'ok') {
    const [used, max, expiresAt] = values.map(Number);
    return {
      ok: true,
      grantId: detail,
      usedActions: used ?? 0,
      maxActions: max ?? 0,
      expiresAtMs: expiresAt ?? 0,
    };
  }
  if (code === 'no_live_grant') {
    return { ok: false, code, status: undefined, message: `run ${runId} has no live grant` };
  }
  if (isRefusalCode(code)) return refusal(runId, code, detail, 'running');
  throw new Error(`consumeGrant answered ${code}`);
}

export async function listGrants(context: RunStoreContext, runId: string): Promise<GrantView[]> {
  const values = await context.redis.hvals(context.keys.grants(runId));
  return values.map(parseGrant).sort((a, b) => a.created_at_ms - b.created_at_ms);
}
