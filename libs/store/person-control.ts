import { newId } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { slotBatch } from './slot-batch.js';

/**
 * A person on a run's page (`person_control`): taking it over and letting go of a takeover that
 * could not start. The hand-back is a decision of the run's `person` approval (decideApproval with
 * a holder), which resumes the run as any last decision does. Apart from the transition table's
 * `take_over` (a worker claiming a stalled run): nothing here changes a run's status.
 */

export type TakeOver =
  /** The page is the person's now (a parked run): start the data plane's control. */
  | {
      ok: true;
      state: 'held';
      approvalId: string;
      sinceMs: number;
      untilMs: number;
      /** A `person` approval was written for it (the run was parked on an action's approval). */
      created: boolean;
      /** A new hold, not the same holder's renewal. */
      fresh: boolean;
    }
  /** The run is running or queued: its loop parks at its next safe point and hands the page over. */
  | { ok: true; state: 'pausing' }
  | {
      ok: false;
      code: 'not_found' | 'not_principal' | 'wrong_status' | 'person_in_control';
      /** The run's status (`wrong_status`) or the holder (`person_in_control`). */
      detail: string;
    };

export interface TakeOverRequest {
  tenant: string;
  principal: string;
  /** `principal:<id>`: who the data plane lets send input. */
  holder: string;
  /** When the takeover ends by itself (epoch ms). */
  untilMs: number;
  /** What a takeover of a run parked on an action's approval shows as its reason. */
  reason: string;
  /** The page's URL as the person is given it, where it could be read. */
  startUrl?: string | null;
}

/** `principal:<id>`: the holder the data plane names a person's takeover by. */
export function personHolder(principal: string): string {
  return `principal:${principal}`;
}

export async function takeOverRun(
  context: RunStoreContext,
  runId: string,
  request: TakeOverRequest,
): Promise<TakeOver> {
  const { redis, keys } = context;
  // A parked run waiting on an action's approval gets a `person` approval of its own: its pointer
  // and index entry go first, as requestApproval writes them; unused, they read as absent.
  const approvalId = newId('apr');
  const [deadlineAt] = await redis.hmget(keys.run(runId), 'deadline_at');
  if (deadlineAt === null) return { ok: false, code: 'not_found', detail: '' };
  const now = context.now();
  const pointerTtlMs = Math.max(0, Number(deadlineAt) - now || 0) + context.retentionMs;
  await slotBatch(redis)
    .set(keys.approvalRun(approvalId), runId, 'PX', pointerTtlMs)
    .zadd(keys.tenantApprovals(request.tenant), now, approvalId)
    .exec();
  const [code, detail, values] = await redis.takeOverRun(
    keys.run(runId),
    keys.events(runId),
    keys.approvals(runId),
    'take',
    request.tenant,
    request.principal,
    request.holder,
    now,
    request.untilMs,
    approvalId,
    request.reason,
    request.startUrl ?? '',
  );
  const created = code === 'held' && String(values[2]) === '1';
  if (!created) {
    await slotBatch(redis)
      .del(keys.approvalRun(approvalId))
      .zrem(keys.tenantApprovals(request.tenant), approvalId)
      .exec();
  }
  if (code === 'held') {
    return {
      ok: true,
      state: 'held',
      approvalId: detail,
      sinceMs: Number(values[0]),
      untilMs: Number(values[1]),
      created,
      fresh: String(values[3]) === '1',
    };
  }
  if (code === 'pausing') return { ok: true, state: 'pausing' };
  if (
    code === 'not_found' ||
    code === 'not_principal' ||
    code === 'wrong_status' ||
    code === 'person_in_control'
  )
    return { ok: false, code, detail };
  throw new Error(`takeOverRun answered ${code}`);
}

/**
 * Lets go of `holder`'s takeover without resuming anything: its request to a running run, or its
 * hold of a parked run's `person` approval (which stays pending for someone to take over again).
 * For a takeover whose data-plane control could not start.
 */
export async function releaseTakeover(
  context: RunStoreContext,
  runId: string,
  tenant: string,
  principal: string,
  holder: string,
  /** The approval the failed takeover wrote (`TakeOver.created`), removed with it. */
  createdApprovalId = '',
): Promise<void> {
  const { redis, keys } = context;
  await redis.takeOverRun(
    keys.run(runId),
    keys.events(runId),
    keys.approvals(runId),
    'release',
    tenant,
    principal,
    holder,
    context.now(),
    0,
    createdApprovalId,
    '',
    '',
  );
}

/** The takeover a running run's loop must obey at its next safe point, if one was asked for. */
export async function takeoverRequested(
  context: RunStoreContext,
  runId: string,
): Promise<{ holder: string; atMs: number } | undefined> {
  const raw = await context.redis.hget(context.keys.run(runId), 'person_request');
  if (!raw) return undefined;
  const parsed = JSON.parse(raw) as { holder?: unknown; at?: unknown };
  return typeof parsed.holder === 'string' ? { holder: parsed.holder, atMs: Number(parsed.at) } : undefined;
}
