import { canonicalJson } from '../contracts/canonical-json.js';
import { type RunErrorCode, type RunView, recordIdSchema } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { runScriptKeys } from './run-retention.js';
import { type RunRefusal, type RunTransition, toTransition } from './run-transition.js';
import { slotBatch } from './slot-batch.js';

/**
 * A run's status changes (DESIGN §4), each one script on the run's own keys that checks the
 * expected status and, for a running run, the owner token: a worker that lost its run gets a
 * refusal (`not_owner`) and writes nothing.
 */

/** How a running run ends by its owner. */
export type RunEnd =
  | { status: 'succeeded'; result: unknown }
  | {
      status: 'failed';
      /** A failure reason, or the code of the tool whose failure ended the run. */
      code: RunErrorCode;
      message: string;
      /** The run's step index where it failed (see `runErrorSchema`); omitted when none is known. */
      step?: number;
    }
  | { status: 'cancelled'; message?: string };

/** The reasons the sweeper (or a lifecycle step without the owner token) fails a run for. */
export type SweptFailure =
  | 'reclaimed'
  | 'deadline_exceeded'
  | 'internal_error'
  | 'provider_unavailable'
  | 'person_timeout';

/**
 * A claim's answer; a fresh claim (`claimed`) tells when the run became queued (queue
 * wait). `transcriptEntries`: how many entries the current attempt's transcript holds as the claim
 * found it (an owner whose run has none need not read it).
 */
export type ClaimTransition =
  | ({ ok: true; detail: 'claimed' | 'already' | 'taken_over'; run: RunView } & {
      queuedAtMs?: number;
      transcriptEntries?: number;
    })
  | RunRefusal;

export async function claimRun(
  context: RunStoreContext,
  runId: string,
  execution: number,
  ownerToken: string,
  takeOver: boolean,
  workerId = '',
): Promise<ClaimTransition> {
  const { redis, keys } = context;
  const reply = await redis.claimRun(
    keys.run(runId),
    keys.events(runId),
    keys.transcript(runId),
    execution,
    ownerToken,
    takeOver ? '1' : '0',
    context.now(),
    workerId,
  );
  await moveUpkeep(context, workerId, reply[5]);
  const transition = toTransition<'claimed' | 'already' | 'taken_over'>(
    runId,
    [reply[0], reply[1], reply[2]],
    `queued at execution ${execution}`,
  );
  if (!transition.ok) return transition;
  const queuedAtMs = Number(reply[3] || Number.NaN);
  const transcriptEntries = typeof reply[4] === 'number' ? reply[4] : undefined;
  return {
    ...transition,
    ...(queuedAtMs > 0 ? { queuedAtMs } : {}),
    ...(transcriptEntries !== undefined ? { transcriptEntries } : {}),
  };
}

/**
 * ADR-0127 d6: the run's lease goes with the run, from the upkeep index of the worker that kept it
 * to the claiming worker's. The claim script named the new worker on the run's record; the two
 * indexes lie in other slots, so they are written here, in one pipeline. Were this lost, the old
 * worker keeps renewing the lease (or the sweeper hands it on once that worker is gone).
 */
async function moveUpkeep(context: RunStoreContext, workerId: string, upkeep: string[] | undefined) {
  const [from, leaseId, profile] = upkeep ?? [];
  if (!workerId || !leaseId || !profile || from === workerId) return;
  const move = slotBatch(context.redis).hset(context.keys.upkeepIndex(workerId), leaseId, profile);
  if (from) move.hdel(context.keys.upkeepIndex(from), leaseId);
  await move.exec();
}

/** `running → parked | waiting_child | waiting_user` by its owner (ends the execution). */
export async function suspendRun(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  status: 'parked' | 'waiting_child' | 'waiting_user',
  detail: Record<string, unknown>,
  waitingOn: string,
): Promise<RunTransition> {
  const { redis, keys } = context;
  // A run whose cancel was requested ends here, so the script holds every key it owns.
  const reply = await redis.suspendRun(
    ...(await runScriptKeys(context, runId, [keys.run(runId), keys.events(runId)])),
    ownerToken,
    status,
    context.now(),
    JSON.stringify(detail),
    waitingOn,
    context.retentionMs,
  );
  return toTransition(runId, reply, 'running');
}

export interface RequeueOptions {
  expected?: 'parked' | 'waiting_child' | 'waiting_user';
  waitingOn?: string;
  detail?: Record<string, unknown>;
}

export async function requeueRun(
  context: RunStoreContext,
  runId: string,
  options: RequeueOptions,
): Promise<RunTransition<'queued'>> {
  const { redis, keys } = context;
  const reply = await redis.requeueRun(
    keys.run(runId),
    keys.events(runId),
    context.now(),
    options.expected ?? '',
    JSON.stringify(options.detail ?? {}),
    options.waitingOn ?? '',
  );
  return toTransition(runId, reply, options.expected ?? 'parked, waiting_child or waiting_user');
}

export async function releaseRun(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  options: { detail?: Record<string, unknown>; maxHandbacks?: number },
): Promise<RunTransition<string>> {
  const { redis, keys } = context;
  const reply = await redis.releaseRun(
    keys.run(runId),
    keys.events(runId),
    ownerToken,
    context.now(),
    JSON.stringify(options.detail ?? {}),
    options.maxHandbacks ?? 0,
  );
  return toTransition(runId, reply, 'running under this owner, within its hand-backs');
}

export async function finishRun(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  end: RunEnd,
  attempts?: number,
): Promise<RunTransition> {
  const { redis, keys } = context;
  const reply = await redis.finishRun(
    ...(await runScriptKeys(context, runId, [keys.run(runId), keys.events(runId)], attempts)),
    ownerToken,
    end.status,
    end.status === 'succeeded' ? canonicalJson(end.result ?? null) : '',
    end.status === 'succeeded' ? '' : end.status === 'failed' ? end.code : 'cancelled',
    end.status === 'succeeded' ? '' : (end.message ?? 'cancelled while running'),
    context.now(),
    end.status === 'failed' && end.step !== undefined ? end.step : '',
    context.retentionMs,
  );
  return toTransition(runId, reply, 'running');
}

export async function cancelRun(
  context: RunStoreContext,
  tenant: string,
  runId: string,
  message: string,
): Promise<RunTransition<'cancelled' | 'cancel_requested'>> {
  if (!recordIdSchema.safeParse(runId).success) return toTransition(runId, ['not_found', '', []], '');
  const { redis, keys } = context;
  const reply = await redis.cancelRun(
    ...(await runScriptKeys(context, runId, [keys.run(runId), keys.events(runId), keys.approvals(runId)])),
    context.now(),
    tenant,
    message,
    keys.cancelChannel(),
    context.retentionMs,
  );
  return toTransition(runId, reply, 'queued, running, parked or waiting');
}

export async function failRun(
  context: RunStoreContext,
  runId: string,
  reason: SweptFailure,
  options: { expectedExecution?: number; message?: string; step?: number },
): Promise<RunTransition<'failed'>> {
  const { redis, keys } = context;
  const reply = await redis.failRun(
    ...(await runScriptKeys(context, runId, [keys.run(runId), keys.events(runId), keys.approvals(runId)])),
    reason,
    options.expectedExecution ?? 0,
    context.now(),
    options.message ?? reason,
    options.step ?? '',
    context.retentionMs,
  );
  return toTransition(runId, reply, 'not ended');
}
