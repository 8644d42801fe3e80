import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  type AgentDefinition,
  type AgentView,
  ApiError,
  type ApiKeyIdentity,
  type ApiKeyView,
  type ApprovalView,
  type GrantRequest,
  type GrantView,
  jsonBoundsProblem,
  type LedgerEntry,
  newId,
  RUN_INPUT_BOUNDS,
  type RunErrorCode,
  type RunEvent,
  type RunEventType,
  type RunLimits,
  type RunStatus,
  type RunUsage,
  type RunView,
  recordIdSchema,
  runLimitsSchema,
  type SessionView,
  type UnverifiedError,
  unverifiedErrorSchema,
} from '../contracts/index.js';
import {
  createSession,
  getAgent,
  getAgentVersion,
  getSession,
  type NewSession,
  type PutAgentOutcome,
  putAgent,
} from './agents.js';
import { createApiKey, listApiKeys, type NewApiKey, resolveApiKey, revokeApiKey } from './api-keys.js';
import {
  type ApprovalDecider,
  type ApprovalDecision,
  type ApprovalRequest,
  consumeGrant,
  decideApproval,
  type GrantUse,
  getApproval,
  listGrants,
  listRunApprovals,
  listTenantPendingApprovals,
  requestApproval,
} from './approvals.js';
import { canonicalJson, sha256Hex } from './canonical-json.js';
import { type InvocationRecord, type LedgerOutcome, listInvocations, recordInvocation } from './ledger.js';
import { earlierEffects, inputText, retryNote } from './retry-note.js';
import {
  expireStaleApprovals,
  indexRetriedRun,
  indexSubmittedRun,
  listDueRunDeadlines,
  type RunDeadline,
  reindexFromRecord,
  type StaleApprovals,
  scanRunDeadlines,
  settleRunDeadline,
} from './run-deadlines.js';
import {
  appendEvent,
  closeStreamSlot,
  eventsChannel,
  openStreamSlot,
  readEvents,
  renewStreamSlots,
} from './run-events.js';
import { RunKeys, type RunStoreContext } from './run-keys.js';
import { fieldsToRecord, parseRun, parseRunStatus } from './run-records.js';
import { type RunRefusal, type RunTransition, toTransition } from './run-transition.js';
import { withScripts } from './scripts.js';

/** Entries kept in one run's event stream. */
export const RUN_EVENTS_CAP = 10_000;

export interface RunStoreOptions {
  /** Entries kept per run event stream; older ones are trimmed. Default {@link RUN_EVENTS_CAP}. */
  eventsCap?: number;
}

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
   * The whole validated request as the caller received it (issue 11.8): a duplicate must match it
   * in every field, present and future (the API passes its body: input, script, timeout_ms…).
   * Hashed with the input and the parent. A delegated child passes none: its timeout is derived
   * from what its parent has left, so a resubmission of the same invocation differs there alone.
   */
  request?: unknown;
  /** The session, when the caller has read it already (sessions never change); else it is read. */
  session?: SessionView;
  parentRunId?: string;
}

export type SubmitOutcome = { status: 'created' | 'existing'; run: RunView };

/** How a running run ends by its owner. */
export type RunEnd =
  | { status: 'succeeded'; result: unknown }
  | {
      status: 'failed';
      /** A failure reason, or the code of the tool whose failure ended the run (issue 12). */
      code: RunErrorCode;
      message: string;
      /** The run's step index where it failed (see `runErrorSchema`); omitted when none is known. */
      step?: number;
    }
  | { status: 'cancelled'; message?: string };

function decider(by: string | ApprovalDecider): ApprovalDecider {
  return typeof by === 'string' ? { by } : by;
}

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
 * Leasehold's run records in Redis (DESIGN §3, §4): API keys, agents, sessions, runs and their
 * ledger, approvals, grants and events. Every status change is one Lua script that checks the
 * expected status and, for a running run, the owner token: a worker that lost its run gets a
 * refusal (`not_owner`) and writes nothing.
 */
export class RunStore {
  readonly #context: RunStoreContext;

  constructor(
    redis: Redis,
    keyPrefix: string,
    clock: () => number = Date.now,
    options: RunStoreOptions = {},
  ) {
    const eventsCap = options.eventsCap ?? RUN_EVENTS_CAP;
    if (!Number.isInteger(eventsCap) || eventsCap < 1)
      throw new RangeError(`eventsCap: expected a positive integer, got ${eventsCap}`);
    this.#context = { redis: withScripts(redis), keys: new RunKeys(keyPrefix), now: clock, eventsCap };
  }

  /**
   * The pub/sub channel on which the id of a running run is published when its cancel is
   * requested; a run worker subscribes once and stops that run before its next call.
   */
  get cancelChannel(): string {
    return this.#context.keys.cancelChannel();
  }

  // API keys

  createApiKey(input: NewApiKey): Promise<{ key: string; identity: ApiKeyIdentity }> {
    return createApiKey(this.#context, input);
  }
  resolveApiKey(presented: string): Promise<ApiKeyIdentity | undefined> {
    return resolveApiKey(this.#context, presented);
  }

  // Agents and sessions

  putAgent(tenant: string, definition: unknown, agentId?: string): Promise<PutAgentOutcome> {
    return putAgent(this.#context, tenant, definition, agentId);
  }
  /** Creates the agent `agentId` or gives it this definition as its latest version. */
  upsertAgent(tenant: string, definition: unknown, agentId: string): Promise<PutAgentOutcome> {
    return putAgent(this.#context, tenant, definition, agentId, true);
  }
  getAgent(tenant: string, agentId: string): Promise<AgentView | undefined> {
    return getAgent(this.#context, tenant, agentId);
  }
  getAgentVersion(tenant: string, agentId: string, version: string): Promise<AgentDefinition | undefined> {
    return getAgentVersion(this.#context, tenant, agentId, version);
  }
  createSession(input: NewSession): Promise<SessionView | undefined> {
    return createSession(this.#context, input);
  }
  getSession(tenant: string, sessionId: string): Promise<SessionView | undefined> {
    return getSession(this.#context, tenant, sessionId);
  }

  // Runs

  /**
   * Stores a run `queued` (attempt 1, execution 1). Throws `not_found` for a session the tenant
   * does not have, `idempotency_conflict` for a key reused with another input.
   */
  async submitRun(input: SubmitRun): Promise<SubmitOutcome> {
    const { redis, keys } = this.#context;
    const session =
      input.session?.tenant === input.tenant && input.session.id === input.sessionId
        ? input.session
        : await this.getSession(input.tenant, input.sessionId);
    if (!session) throw new ApiError('not_found', `session ${input.sessionId} not found`);
    const limits = runLimitsSchema.parse(input.limits);
    if (!Number.isInteger(input.timeoutMs) || input.timeoutMs <= 0) {
      throw new RangeError(`timeoutMs: expected a positive integer, got ${input.timeoutMs}`);
    }
    const parentRunId = input.parentRunId === undefined ? '' : recordIdSchema.parse(input.parentRunId);
    // Issue 11.4: everything is checked before the first write; a refused request leaves nothing.
    const inputProblem = jsonBoundsProblem(input.input ?? null, RUN_INPUT_BOUNDS);
    if (inputProblem) throw new ApiError('validation_failed', `input: ${inputProblem}`);
    const runId =
      input.idempotencyKey === undefined
        ? newId('run')
        : idempotentRunId(input.tenant, session.id, input.idempotencyKey);
    const now = this.#context.now();
    const inputJson = canonicalJson(input.input ?? null);
    const requestHash = sha256Hex(
      canonicalJson({
        input: input.input ?? null,
        parent_run_id: parentRunId,
        request: input.request ?? null,
      }),
    );
    // Listed before it exists: an index entry whose run was never written reads as absent. The
    // three go in one pipeline (one round trip), which Redis runs in order.
    const pipeline = redis.pipeline() as ReturnType<typeof redis.pipeline> & {
      submitRun: (...args: Array<string | number>) => unknown;
    };
    pipeline.zadd(keys.sessionRuns(session.id), 'NX', now, runId);
    indexSubmittedRun(pipeline, keys, runId, now + input.timeoutMs);
    pipeline.submitRun(
      keys.run(runId),
      keys.events(runId),
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
      this.#context.eventsCap,
    );
    const replies = (await pipeline.exec()) ?? [];
    const failed = replies.find(([error]) => error);
    if (failed?.[0]) throw failed[0];
    const [code, , fields] = (replies[2]?.[1] ?? ['no_reply', '', []]) as [
      string,
      string,
      Array<string | number>,
    ];
    if (code === 'conflict') {
      throw new ApiError('idempotency_conflict', 'this Idempotency-Key was used for a different run request');
    }
    const stored = parseRun(fieldsToRecord(fields));
    if (!stored || (code !== 'created' && code !== 'existing')) throw new Error(`submitRun answered ${code}`);
    return { status: code, run: stored.run };
  }

  /**
   * Whether the loop must stop before its next call: a cancel was asked, or the run is no longer
   * running (ended elsewhere: reclaimed, cancelled). One round trip, no record parsed.
   */
  async stopRequested(runId: string): Promise<boolean> {
    const [status, cancel] = await this.#context.redis.hmget(
      this.#context.keys.run(runId),
      'status',
      'cancel_requested',
    );
    return status !== 'running' || cancel === '1';
  }

  /**
   * Status and deadline of many runs in one pipelined round trip (the lease upkeep's read); a run
   * that does not exist is absent from the map.
   */
  async runStates(
    runIds: readonly string[],
  ): Promise<Map<string, { status: RunStatus; deadlineAtMs: number }>> {
    const states = new Map<string, { status: RunStatus; deadlineAtMs: number }>();
    if (runIds.length === 0) return states;
    const pipeline = this.#context.redis.pipeline();
    for (const runId of runIds) pipeline.hmget(this.#context.keys.run(runId), 'status', 'deadline_at');
    const replies = (await pipeline.exec()) ?? [];
    runIds.forEach((runId, index) => {
      const [status, deadline] = (replies[index]?.[1] ?? []) as Array<string | null>;
      const parsed = status ? parseRunStatus(status) : undefined;
      if (parsed) states.set(runId, { status: parsed, deadlineAtMs: Number(deadline) });
    });
    return states;
  }

  /** The run, or undefined; with `tenant`, another tenant's run reads as absent. */
  async getRun(runId: string, tenant?: string): Promise<RunView | undefined> {
    if (!recordIdSchema.safeParse(runId).success) return undefined;
    const fields = await this.#context.redis.hgetall(this.#context.keys.run(runId));
    // The tenant is compared on the raw record first: another tenant's run reads as absent even
    // when it could not be parsed (`record_unreadable` would tell them it exists).
    if (tenant !== undefined && fields.tenant !== tenant) return undefined;
    return parseRun(fields)?.run;
  }

  /** The session's runs in submission order. */
  async listRuns(tenant: string, sessionId: string): Promise<RunView[]> {
    if (!(await this.getSession(tenant, sessionId))) return [];
    const { redis, keys } = this.#context;
    const ids = await redis.zrange(keys.sessionRuns(sessionId), 0, -1);
    const runs = await Promise.all(ids.map((id) => this.getRun(id, tenant)));
    return runs.filter((run): run is RunView => run !== undefined);
  }

  /**
   * `queued → running` for the job of `execution`, owned by `ownerToken`. A stale job (another
   * execution) or a run running under another owner is refused, unless `takeOver` is set for a
   * stalled job of the current execution (BullMQ handed it on from a dead worker; same attempt).
   */
  async claimRun(
    runId: string,
    execution: number,
    ownerToken: string,
    options: { takeOver?: boolean } = {},
  ): Promise<RunTransition<'claimed' | 'already' | 'taken_over'>> {
    const reply = await this.#context.redis.claimRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      execution,
      ownerToken,
      options.takeOver ? '1' : '0',
      this.#context.now(),
    );
    return toTransition(runId, reply, `queued at execution ${execution}`);
  }

  /** `running → parked` by its owner (ends the execution; the lease stays). */
  parkRun(runId: string, ownerToken: string, detail: Record<string, unknown> = {}): Promise<RunTransition> {
    return this.#suspend(runId, ownerToken, 'parked', detail);
  }

  /**
   * `running → waiting_child | waiting_user` by its owner; a run waiting on a child names it in
   * `waitingOn` (shown as `waiting_on_run_id`; only that child's end resumes it).
   */
  waitRun(
    runId: string,
    ownerToken: string,
    status: 'waiting_child' | 'waiting_user',
    detail: Record<string, unknown> = {},
    waitingOn = '',
  ): Promise<RunTransition> {
    return this.#suspend(runId, ownerToken, status, detail, waitingOn);
  }

  async #suspend(
    runId: string,
    ownerToken: string,
    status: string,
    detail: Record<string, unknown>,
    waitingOn = '',
  ) {
    const reply = await this.#context.redis.suspendRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      ownerToken,
      status,
      this.#context.now(),
      JSON.stringify(detail),
      waitingOn,
    );
    return toTransition(runId, reply, 'running');
  }

  /**
   * `parked | waiting_child | waiting_user → queued` as a new execution; the caller enqueues the
   * job of `run.execution`. With `expected`, only from that status; with `waitingOn`, only a run
   * waiting on that run (a child's end resumes its own parent, once).
   */
  async requeueRun(
    runId: string,
    options: {
      expected?: 'parked' | 'waiting_child' | 'waiting_user';
      waitingOn?: string;
      detail?: Record<string, unknown>;
    } = {},
  ): Promise<RunTransition<'queued'>> {
    const reply = await this.#context.redis.requeueRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      this.#context.now(),
      options.expected ?? '',
      JSON.stringify(options.detail ?? {}),
      options.waitingOn ?? '',
    );
    return toTransition(runId, reply, options.expected ?? 'parked, waiting_child or waiting_user');
  }

  /**
   * `running → queued` by its owner, at the same execution (issue 12): the owner is cleared so
   * the next claim of that execution's job takes the run over at once; the lease stays for it.
   * With `maxHandbacks`, a run handed back that often already is refused (`stale_execution`) and
   * left running for the caller to fail. An accepted release's `detail` is the run's hand-backs
   * so far, as text.
   */
  async releaseRun(
    runId: string,
    ownerToken: string,
    options: { detail?: Record<string, unknown>; maxHandbacks?: number } = {},
  ): Promise<RunTransition<string>> {
    const reply = await this.#context.redis.releaseRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      ownerToken,
      this.#context.now(),
      JSON.stringify(options.detail ?? {}),
      options.maxHandbacks ?? 0,
    );
    return toTransition(runId, reply, 'running under this owner, within its hand-backs');
  }

  /** `running → succeeded | failed | cancelled` by its owner. */
  async finishRun(runId: string, ownerToken: string, end: RunEnd): Promise<RunTransition> {
    const reply = await this.#context.redis.finishRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      ownerToken,
      end.status,
      end.status === 'succeeded' ? canonicalJson(end.result ?? null) : '',
      end.status === 'succeeded' ? '' : end.status === 'failed' ? end.code : 'cancelled',
      end.status === 'succeeded' ? '' : (end.message ?? 'cancelled while running'),
      this.#context.now(),
      end.status === 'failed' && end.step !== undefined ? end.step : '',
    );
    return toTransition(runId, reply, 'running');
  }

  /**
   * Cancels: a queued, parked or waiting run ends `cancelled` now (`detail: 'cancelled'`; the
   * caller releases its lease); a running run gets its cancel flag (`'cancel_requested'`).
   */
  async cancelRun(
    tenant: string,
    runId: string,
    message = 'cancelled by request',
  ): Promise<RunTransition<'cancelled' | 'cancel_requested'>> {
    if (!recordIdSchema.safeParse(runId).success) return toTransition(runId, ['not_found', '', []], '');
    const reply = await this.#context.redis.cancelRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      this.#context.keys.approvals(runId),
      this.#context.now(),
      tenant,
      message,
      this.#context.keys.cancelChannel(),
    );
    return toTransition(runId, reply, 'queued, running, parked or waiting');
  }

  /**
   * The sweeper's end: fails a run that has not ended, whoever owns it (`reclaimed` past the
   * worker retry limit, `deadline_exceeded` past its deadline). A run worker ends its own run
   * with {@link finishRun} (owner-checked), an escaped error included (issue 12). With
   * `expectedExecution`, a run that has moved to another execution is left alone.
   */
  async failRun(
    runId: string,
    reason: 'reclaimed' | 'deadline_exceeded' | 'internal_error' | 'provider_unavailable',
    options: {
      expectedExecution?: number;
      message?: string;
      /** The run's step index where it failed, where the caller knows it (`runErrorSchema`). */
      step?: number;
    } = {},
  ): Promise<RunTransition<'failed'>> {
    const reply = await this.#context.redis.failRun(
      this.#context.keys.run(runId),
      this.#context.keys.events(runId),
      this.#context.keys.approvals(runId),
      reason,
      options.expectedExecution ?? 0,
      this.#context.now(),
      options.message ?? reason,
      options.step ?? '',
    );
    return toTransition(runId, reply, 'not ended');
  }

  /**
   * A failed run as a new attempt: attempt + 1, a new execution, `queued`, on a fresh transcript
   * that holds the input and a note of the effects earlier attempts dispatched (issue 12); the
   * failed attempt's transcript is kept under its number (`RunTranscripts.loadAttempt`).
   */
  async retryRun(tenant: string, runId: string): Promise<RunTransition<'queued'>> {
    if (!recordIdSchema.safeParse(runId).success) return toTransition(runId, ['not_found', '', []], '');
    const failed = await this.getRun(runId, tenant);
    if (!failed) return toTransition(runId, ['not_found', '', []], '');
    const entries = await this.#freshTranscript(failed);
    const now = this.#context.now();
    // Indexed at its new deadline before the script sets it (see run-deadlines.ts).
    const indexed = await indexRetriedRun(this.#context, runId, tenant, now);
    const { keys } = this.#context;
    // The script refuses (`stale_execution`) if another retry moved the attempt since the read.
    const reply = await this.#context.redis.retryRun(
      keys.run(runId),
      keys.events(runId),
      keys.transcript(runId),
      keys.attemptTranscript(runId, failed.attempt),
      keys.loopState(runId),
      now,
      tenant,
      failed.attempt,
      ...entries.map((entry) => JSON.stringify(entry)),
    );
    const transition = toTransition<'queued'>(runId, reply, 'failed');
    if (!transition.ok && indexed) await reindexFromRecord(this.#context, runId);
    return transition;
  }

  /** A new attempt's first entries: the input, and the note of what earlier attempts dispatched. */
  async #freshTranscript(run: RunView): Promise<unknown[]> {
    const { redis, keys } = this.#context;
    const transcripts = new Map<number, unknown[]>();
    for (let attempt = 1; attempt <= run.attempt; attempt += 1) {
      const key = attempt === run.attempt ? keys.transcript(run.id) : keys.attemptTranscript(run.id, attempt);
      transcripts.set(
        attempt,
        (await redis.lrange(key, 0, -1)).map((entry) => JSON.parse(entry) as unknown),
      );
    }
    const effects = earlierEffects(await this.listInvocations(run.id), transcripts);
    const note = retryNote(run.attempt + 1, effects);
    return [{ kind: 'input', text: inputText(run.input) }, ...(note ? [note] : [])];
  }

  /** Adds to a running run's usage, by its owner. Cost in integer micro-USD. */
  async addUsage(runId: string, ownerToken: string, delta: Partial<RunUsage>): Promise<RunTransition> {
    const counts = [
      delta.steps ?? 0,
      delta.model_calls ?? 0,
      delta.tool_calls ?? 0,
      delta.cost_micro_usd ?? 0,
    ];
    if (counts.some((value) => !Number.isSafeInteger(value) || value < 0)) {
      throw new RangeError(`usage deltas are non-negative integers, got ${JSON.stringify(delta)}`);
    }
    const reply = await this.#context.redis.addUsage(this.#context.keys.run(runId), ownerToken, ...counts);
    return toTransition(runId, reply, 'running');
  }

  /**
   * ADR-0177: marks a running run's outcome unverified, by its owner, with the exhausted
   * acquisition's last error (its stable code and message); the run view shows it whatever the end.
   */
  async markUnverified(runId: string, ownerToken: string, error: UnverifiedError): Promise<RunTransition> {
    const reply = await this.#context.redis.markUnverified(
      this.#context.keys.run(runId),
      ownerToken,
      JSON.stringify(unverifiedErrorSchema.parse(error)),
      this.#context.now(),
    );
    return toTransition(runId, reply, 'running');
  }

  /** The run loop's stored state (the loop breaker's snapshot), or undefined before any was saved. */
  async loadLoopState(runId: string): Promise<unknown> {
    const text = await this.#context.redis.get(this.#context.keys.loopState(runId));
    return text ? JSON.parse(text) : undefined;
  }

  /** Saves the run loop's state, by the run's owner only; a lost run refuses (`ok: false`). */
  async saveLoopState(runId: string, ownerToken: string, state: unknown): Promise<{ ok: boolean }> {
    const [code] = await this.#context.redis.saveLoopState(
      this.#context.keys.run(runId),
      this.#context.keys.loopState(runId),
      ownerToken,
      JSON.stringify(state),
    );
    return { ok: code === 'ok' };
  }

  // Ledger

  recordInvocation(runId: string, ownerToken: string, record: InvocationRecord): Promise<LedgerOutcome> {
    return recordInvocation(this.#context, runId, ownerToken, record);
  }
  listInvocations(runId: string, attempt?: number): Promise<LedgerEntry[]> {
    return listInvocations(this.#context, runId, attempt);
  }

  // Approvals and grants

  /** Records a pending approval for an invocation and parks the run, in one script. */
  requestApproval(
    runId: string,
    ownerToken: string,
    request: ApprovalRequest,
  ): Promise<{ approvalId: string; transition: RunTransition<'parked' | 'cancelled'> }> {
    return requestApproval(this.#context, runId, ownerToken, request);
  }
  getApproval(tenant: string, approvalId: string): Promise<ApprovalView | undefined> {
    return getApproval(this.#context, tenant, approvalId);
  }
  /** Pending approvals of the tenant, or of one of its runs. */
  async listPendingApprovals(tenant: string, runId?: string): Promise<ApprovalView[]> {
    if (runId === undefined) return listTenantPendingApprovals(this.#context, tenant);
    if (!(await this.getRun(runId, tenant))) return [];
    return (await listRunApprovals(this.#context, runId)).filter((approval) => approval.status === 'pending');
  }
  listApprovals(runId: string): Promise<ApprovalView[]> {
    return listRunApprovals(this.#context, runId);
  }
  /**
   * `by` is the principal deciding; a string is a trusted in-process decider (any principal of the
   * tenant). The API passes `{by, ownRunsOnly}` for a key without `approvals:any` (issue 11.11).
   */
  approve(
    tenant: string,
    approvalId: string,
    by: string | ApprovalDecider,
    grant?: GrantRequest,
  ): Promise<ApprovalDecision> {
    return decideApproval(this.#context, tenant, approvalId, { approved: true, ...decider(by), grant });
  }
  deny(
    tenant: string,
    approvalId: string,
    by: string | ApprovalDecider,
    reason: string,
  ): Promise<ApprovalDecision> {
    return decideApproval(this.#context, tenant, approvalId, { approved: false, ...decider(by), reason });
  }
  /** One use of a live grant for this invocation; asking again for the same one charges nothing. */
  consumeGrant(runId: string, ownerToken: string, invocationId: string): Promise<GrantUse> {
    return consumeGrant(this.#context, runId, ownerToken, invocationId);
  }
  listGrants(runId: string): Promise<GrantView[]> {
    return listGrants(this.#context, runId);
  }

  // Events

  appendEvent(
    runId: string,
    ownerToken: string,
    type: RunEventType,
    data: Record<string, unknown> = {},
  ): Promise<{ ok: true; id: string } | RunRefusal> {
    return appendEvent(this.#context, runId, ownerToken, type, data);
  }
  readEvents(runId: string, options: { afterId?: string; count?: number } = {}): Promise<RunEvent[]> {
    return readEvents(this.#context, runId, options);
  }
  /** The shard channel notified after each append to the run's events (issue 11.10). */
  eventsChannel(runId: string): string {
    return eventsChannel(this.#context, runId);
  }
  /** One of the API key's `max` open event streams, held for `ttlMs` unless renewed; false past `max`. */
  openStreamSlot(keyId: string, member: string, max: number, ttlMs: number): Promise<boolean> {
    return openStreamSlot(this.#context, keyId, member, max, ttlMs);
  }
  renewStreamSlots(slots: ReadonlyArray<{ keyId: string; member: string }>, ttlMs: number): Promise<void> {
    return renewStreamSlots(this.#context, slots, ttlMs);
  }
  closeStreamSlot(keyId: string, member: string): Promise<void> {
    return closeStreamSlot(this.#context, keyId, member);
  }

  // API key administration (DESIGN §3): another tenant's key is never listed nor revoked.

  listApiKeys(tenant: string): Promise<ApiKeyView[]> {
    return listApiKeys(this.#context, tenant);
  }
  /** True if the tenant's key was live; it answers 401 from now on. */
  revokeApiKey(tenant: string, keyId: string): Promise<boolean> {
    return revokeApiKey(this.#context, tenant, keyId);
  }

  // Deadlines: the sweeper's (DESIGN §4)

  /** Deadline-index entries due by the store's clock, earliest first, at most `limit`. */
  listDueRunDeadlines(limit: number): Promise<RunDeadline[]> {
    return listDueRunDeadlines(this.#context, limit);
  }
  /** Re-scores a run's deadline entry to `toMs` if it still carries `fromMs` (a retry's newer one wins). */
  moveRunDeadline(runId: string, fromMs: number, toMs: number): Promise<boolean> {
    return settleRunDeadline(this.#context, runId, fromMs, toMs);
  }
  /** Removes a run's deadline entry if it still carries `atMs`. */
  removeRunDeadline(runId: string, atMs: number): Promise<boolean> {
    return settleRunDeadline(this.#context, runId, atMs, undefined);
  }
  /** One ZSCAN step over the deadline index (cursor '0' starts and ends a cycle). */
  scanRunDeadlines(cursor: string, count: number): Promise<{ cursor: string; runIds: string[] }> {
    return scanRunDeadlines(this.#context, cursor, count);
  }
  /**
   * Expires the pending approvals of a run that is no longer `parked` (ended, re-queued, gone) and
   * drops its settled approvals from the tenant's pending index.
   */
  expireStaleApprovals(runId: string): Promise<StaleApprovals> {
    return expireStaleApprovals(this.#context, runId);
  }
}
