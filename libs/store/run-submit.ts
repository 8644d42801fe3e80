import { createHash } from 'node:crypto';
import type { ChainableCommander } from 'ioredis';
import { canonicalJson, sha256Hex } from '../contracts/canonical-json.js';
import {
  ApiError,
  type DeclaredSecretName,
  jsonBoundsProblem,
  newId,
  RUN_INPUT_BOUNDS,
  type RunLimits,
  type RunView,
  recordIdSchema,
  runLimitsSchema,
  type SessionView,
} from '../contracts/index.js';
import { getSession } from './agents.js';
import { isCluster } from './redis-client.js';
import { indexSubmittedRun } from './run-deadlines.js';
import type { RunStoreContext } from './run-keys.js';
import { fieldsToRecord, parseRun } from './run-records.js';
import { slotBatch } from './slot-batch.js';
import { UploadStore } from './uploads.js';

export interface SubmitRun {
  tenant: string;
  principal: string;
  sessionId: string;
  input: unknown;
  /** The limits pinned on the run (chosen by the caller from `ops/limits.yaml`). */
  limits: RunLimits;
  /** The run's deadline is this long after submission (and after each retry). */
  timeoutMs: number;
  /** Per tenant and session: a duplicate submission answers the first run and creates nothing. */
  idempotencyKey?: string;
  /**
   * The whole validated request as the caller received it: a duplicate must match it
   * in every field, present and future (the API passes its body: input, script, timeout_ms…).
   * Hashed with the input and the parent. A delegated child passes none: its timeout is derived
   * from what its parent has left, so a resubmission of the same invocation differs there alone.
   */
  request?: unknown;
  /** The session, when the caller has read it already (sessions never change); else it is read. */
  session?: SessionView;
  parentRunId?: string;
  /**
   * DESIGN §12: the run's declared secrets, sealed by the caller for the run's id (the sealed blob
   * is bound to it; the store never sees a value), and their names and origins. Stored with the
   * run, once; they expire with its other keys.
   */
  secrets?: { seal: (runId: string) => string; declared: DeclaredSecretName[] };
  /**
   * DESIGN §12: the uploads the run's input lists (`input.files`), held for the run before it is
   * written: each must be the tenant's and still kept (`not_found` otherwise, and no run is
   * written), and from then on it expires with the run, not before.
   */
  files?: readonly string[];
  /**
   * Queues the new run's first job on the batch that stores the run (after it, in the
   * same round trip), as `queues/runs.ts` `addRunJobTo` does. Used only where the run is new for
   * certain — a fresh id (no Idempotency-Key) on one Redis; elsewhere the outcome says `enqueued:
   * false` and the caller enqueues as before. Its reply is checked: a refused add throws, the run
   * stays queued and the orphan sweep adds its job.
   */
  enqueueWith?: (batch: ChainableCommander, run: { id: string; tenant: string; session_id: string }) => void;
}

export type SubmitOutcome = {
  status: 'created' | 'existing';
  run: RunView;
  /** True when the run's first job was added with it (`enqueueWith`). */
  enqueued: boolean;
};

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

/**
 * The run id of a submission with an Idempotency-Key: derived from (tenant, session, key), so
 * every duplicate names the same run and one script on that run's slot decides, atomically,
 * whether it exists. Same shape as `newId('run')` (20 base32 characters, 100 bits).
 */
export function idempotentRunId(tenant: string, sessionId: string, idempotencyKey: string): string {
  const digest = createHash('sha256').update(`${tenant}\n${sessionId}\n${idempotencyKey}`).digest();
  let body = '';
  for (const byte of digest.subarray(0, 20)) body += CROCKFORD[byte & 31];
  return `run_${body}`;
}

/**
 * Stores a run `queued` (attempt 1, execution 1). Throws `not_found` for a session the tenant
 * does not have, `idempotency_conflict` for a key reused with another input.
 */
function failOnError(replies: ReadonlyArray<[Error | null, unknown]>): void {
  const failed = replies.find(([error]) => error);
  if (failed?.[0]) throw failed[0];
}

/** The longest a run may be given to run (`timeout_ms` of `POST /v1/sessions/{id}/runs`). */
const LONGEST_RUN_MS = 24 * 3_600_000;

/**
 * The tenant's and the session's runs indexes live as long as the runs they
 * list may — the longest run and then the retention, from the latest submission or retry — so an
 * index nobody writes to any more expires with the last of its runs. Members of expired runs are
 * pruned by the readers before that.
 */
export function keepRunIndexes(
  pipeline: { pexpire(key: string, ms: number): unknown },
  context: RunStoreContext,
  tenant: string,
  sessionId: string,
  timeoutMs: number,
): void {
  const lifetimeMs = Math.max(LONGEST_RUN_MS, timeoutMs) + context.retentionMs;
  pipeline.pexpire(context.keys.tenantRuns(tenant), lifetimeMs);
  pipeline.pexpire(context.keys.sessionRuns(sessionId), lifetimeMs);
}

export async function submitRun(context: RunStoreContext, input: SubmitRun): Promise<SubmitOutcome> {
  const { redis, keys } = context;
  const session =
    input.session?.tenant === input.tenant && input.session.id === input.sessionId
      ? input.session
      : await getSession(context, input.tenant, input.sessionId);
  if (!session) throw new ApiError('not_found', `session ${input.sessionId} not found`);
  const limits = runLimitsSchema.parse(input.limits);
  if (!Number.isInteger(input.timeoutMs) || input.timeoutMs <= 0) {
    throw new RangeError(`timeoutMs: expected a positive integer, got ${input.timeoutMs}`);
  }
  const parentRunId = input.parentRunId === undefined ? '' : recordIdSchema.parse(input.parentRunId);
  // Everything is checked before the first write; a refused request leaves nothing.
  const inputProblem = jsonBoundsProblem(input.input ?? null, RUN_INPUT_BOUNDS);
  if (inputProblem) throw new ApiError('validation_failed', `input: ${inputProblem}`);
  const runId =
    input.idempotencyKey === undefined
      ? newId('run')
      : idempotentRunId(input.tenant, session.id, input.idempotencyKey);
  const now = context.now();
  if (input.files && input.files.length > 0)
    await new UploadStore(redis, keys, context.now).hold(input.tenant, runId, input.files);
  const inputJson = canonicalJson(input.input ?? null);
  const requestHash = sha256Hex(
    canonicalJson({
      input: input.input ?? null,
      parent_run_id: parentRunId,
      request: input.request ?? null,
    }),
  );
  // Listed before it exists: an index entry whose run was never written reads as absent. On one
  // Redis they all go in one pipeline (one round trip), which Redis runs in order; on a cluster
  // the indexes (other slots, other nodes) are written first and the run's script after them.
  const pipeline = slotBatch(redis) as ChainableCommander & {
    submitRun: (...args: Array<string | number>) => unknown;
  };
  // The tenant's runs list (`GET /v1/runs`) reads this index; a delegated child is
  // submitted here too, so it is listed as well.
  pipeline.zadd(keys.tenantRuns(input.tenant), 'NX', now, runId);
  pipeline.zadd(keys.sessionRuns(session.id), 'NX', now, runId);
  keepRunIndexes(pipeline, context, input.tenant, session.id, input.timeoutMs);
  indexSubmittedRun(pipeline, keys, runId, now + input.timeoutMs);
  const replies = isCluster(redis) ? ((await pipeline.exec()) ?? []) : [];
  if (replies.length > 0) failOnError(replies);
  const script = isCluster(redis) ? (slotBatch(redis) as typeof pipeline) : pipeline;
  script.submitRun(
    keys.run(runId),
    keys.events(runId),
    keys.secrets(runId),
    runId,
    input.tenant,
    input.principal,
    session.id,
    session.agent_id,
    session.agent_version,
    session.browser_profile_id ?? '',
    parentRunId,
    inputJson,
    JSON.stringify(limits),
    input.timeoutMs,
    now,
    requestHash,
    input.idempotencyKey ?? '',
    context.eventsCap,
    input.secrets?.seal(runId) ?? '',
    input.secrets ? JSON.stringify(input.secrets.declared) : '',
  );
  // A fresh id is a new run (a collision of 100 random bits aside), so its job goes with it.
  const enqueued = input.enqueueWith !== undefined && input.idempotencyKey === undefined && !isCluster(redis);
  if (enqueued) input.enqueueWith?.(script, { id: runId, tenant: input.tenant, session_id: session.id });
  const sent = await script.exec();
  const scriptReply = enqueued ? sent?.at(-2) : sent?.at(-1);
  replies.push(...(sent ?? []));
  failOnError(replies);
  const [code, , fields] = (scriptReply?.[1] ?? ['no_reply', '', []]) as [
    string,
    string,
    Array<string | number>,
  ];
  if (code === 'conflict') {
    throw new ApiError('idempotency_conflict', 'this Idempotency-Key was used for a different run request');
  }
  const stored = parseRun(fieldsToRecord(fields));
  if (!stored || (code !== 'created' && code !== 'existing')) throw new Error(`submitRun answered ${code}`);
  return { status: code, run: stored.run, enqueued };
}
