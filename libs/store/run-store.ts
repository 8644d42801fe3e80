import type {
  AgentDefinition,
  AgentView,
  ApiKeyIdentity,
  ApiKeyView,
  ApprovalListStatus,
  ApprovalView,
  DeclaredSecretName,
  GrantRequest,
  GrantView,
  KeyLineage,
  LedgerEntry,
  RunEvent,
  RunEventType,
  RunFile,
  RunStatus,
  RunUsage,
  RunView,
  ScreenshotFailure,
  SessionView,
  UnverifiedError,
} from '../contracts/index.js';
import { activeRunOf } from './active-runs.js';
import {
  createSession,
  type DeleteSessionOutcome,
  deleteSession,
  getAgent,
  getAgentVersion,
  getSession,
  type NewSession,
  type PutAgentOutcome,
  putAgent,
} from './agents.js';
import {
  type ApiKeyRefusal,
  apiKeyLineage,
  createApiKey,
  createApiKeyBy,
  type IssuedApiKey,
  listApiKeys,
  type NewApiKey,
  resolveApiKey,
  revokeApiKey,
} from './api-keys.js';
import {
  type ApprovalDecider,
  type ApprovalDecision,
  type ApprovalRequest,
  consumeGrant,
  decideApproval,
  type GrantUse,
  getApproval,
  type HandBack,
  listGrants,
  listRunApprovals,
  listTenantPendingApprovals,
  requestApproval,
  withNotedCards,
} from './approvals.js';
import { type InvocationRecord, type LedgerOutcome, listInvocations, recordInvocation } from './ledger.js';
import { loadLoopState, saveLoopState } from './loop-state.js';
import {
  releaseTakeover,
  type TakeOver,
  type TakeOverRequest,
  takeOverRun,
  takeoverRequested,
} from './person-control.js';
import type { RedisClient } from './redis-client.js';
import {
  expireStaleApprovals,
  listDueRunDeadlines,
  type RunDeadline,
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
import { readRunFiles } from './run-files.js';
import { RunKeys, type RunStoreContext } from './run-keys.js';
import { getRun, getRunDetail, interruptions, listRuns, runStates, stopRequested } from './run-reads.js';
import { retryRun } from './run-retry.js';
import { readDeclaredSecrets } from './run-secrets.js';
import {
  type ClaimTransition,
  cancelRun,
  claimRun,
  failRun,
  finishRun,
  type RequeueOptions,
  type RunEnd,
  releaseRun,
  requeueRun,
  type SweptFailure,
  suspendRun,
} from './run-status-changes.js';
import {
  listSteps,
  recordStep,
  type StepPage,
  type StepRecord,
  type StepWriteOptions,
  type StepWriteOutcome,
} from './run-steps.js';
import { compileRunStoreOptions, type RunStoreOptions } from './run-store-options.js';
import { type SubmitOutcome, type SubmitRun, submitRun } from './run-submit.js';
import type { RunRefusal, RunTransition } from './run-transition.js';
import { addUsage, markUnverified, noteBrowserTools } from './run-usage.js';
import { notePreviewPending, noteScreenshotMissing } from './screenshot-states.js';
import { withScripts } from './scripts.js';
import { listTenantRuns, type TenantRunPage, type TenantRunQuery } from './tenant-runs.js';
import { UploadStore } from './uploads.js';

export type { RunEnd } from './run-status-changes.js';
export type { StepPage, StepRecord, StepWriteOptions, StepWriteOutcome } from './run-steps.js';
export {
  type CompiledRunStoreOptions,
  compileRunStoreOptions,
  RUN_EVENTS_CAP,
  type RunStoreOptions,
} from './run-store-options.js';
export { idempotentRunId, type SubmitOutcome, type SubmitRun } from './run-submit.js';
export {
  formatRunCursor,
  parseRunCursor,
  SEARCH_WINDOW_RUNS,
  type TenantRunCursor,
  type TenantRunPage,
  type TenantRunQuery,
} from './tenant-runs.js';

function decider(by: string | ApprovalDecider): ApprovalDecider {
  return typeof by === 'string' ? { by } : by;
}

/**
 * Leasehold's run records in Redis (DESIGN §3, §4): API keys, agents, sessions, runs and their
 * ledger, approvals, grants and events. A facade: each family of records lives in its own module
 * over one shared {@link RunStoreContext} (runs in run-submit, run-reads, run-status-changes,
 * run-retry and run-usage; the rest in agents, api-keys, approvals, ledger, loop-state,
 * run-events, run-deadlines), and each method here hands over to it. Every status change is one
 * Lua script on the run's own keys that checks the expected status and, for a running run, the
 * owner token: a worker that lost its run gets a refusal (`not_owner`) and writes nothing.
 */
export class RunStore {
  readonly #context: RunStoreContext;
  /** Uploaded files (`POST /v1/files`) and the runs that hold them. */
  readonly uploads: UploadStore;

  /**
   * `options` as {@link RunStoreOptions}; a bare clock in their place, with the rest after it, is
   * the older positional form, still taken.
   */
  constructor(
    redis: RedisClient,
    keyPrefix: string,
    options: RunStoreOptions | (() => number) = {},
    rest: Omit<RunStoreOptions, 'clock'> = {},
  ) {
    const { clock, eventsCap, retentionMs } = compileRunStoreOptions(
      typeof options === 'function' ? { ...rest, clock: options } : options,
    );
    this.#context = {
      redis: withScripts(redis),
      keys: new RunKeys(keyPrefix),
      now: clock,
      eventsCap,
      retentionMs,
    };
    this.uploads = new UploadStore(this.#context.redis, this.#context.keys, clock);
  }

  /**
   * The pub/sub channel on which the id of a running run is published when its cancel is
   * requested; a run worker subscribes once and stops that run before its next call.
   */
  get cancelChannel(): string {
    return this.#context.keys.cancelChannel();
  }

  // API keys

  /** A key made by the operator (no maker, not held to the tenant's bound). */
  createApiKey(input: NewApiKey): Promise<IssuedApiKey> {
    return createApiKey(this.#context, input);
  }
  /** A key made by the key `maker`, in its tenant, within the bounds `createApiKeyBy` keeps. */
  createApiKeyBy(
    maker: ApiKeyIdentity,
    input: Omit<NewApiKey, 'tenant'>,
    maxPerTenant: number,
  ): Promise<({ ok: true } & IssuedApiKey) | ApiKeyRefusal> {
    return createApiKeyBy(this.#context, maker, input, maxPerTenant);
  }
  /** The tenant's live key `keyId` and the keys that made it, or undefined. */
  apiKeyLineage(tenant: string, keyId: string): Promise<KeyLineage | undefined> {
    return apiKeyLineage(this.#context, tenant, keyId);
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
  /** Deletes the tenant's session unless one of its runs has not ended (that run is named). */
  deleteSession(tenant: string, sessionId: string): Promise<DeleteSessionOutcome> {
    return deleteSession(this.#context, tenant, sessionId);
  }
  /** A run of the tenant's bound to the profile that has not ended, if any (deleting it waits for it). */
  activeRunOnProfile(tenant: string, profileId: string): Promise<string | undefined> {
    return activeRunOf(this.#context, { tenant, profileId });
  }

  // Runs: submission and reads

  /**
   * Stores a run `queued` (attempt 1, execution 1). Throws `not_found` for a session the tenant
   * does not have, `idempotency_conflict` for a key reused with another input.
   */
  submitRun(input: SubmitRun): Promise<SubmitOutcome> {
    return submitRun(this.#context, input);
  }
  /**
   * DESIGN §12: the names and origins of the run's declared secrets (none: empty), what its model
   * is told. Never a value: those stay sealed for the browser worker.
   */
  declaredSecrets(runId: string): Promise<DeclaredSecretName[]> {
    return readDeclaredSecrets(this.#context, runId);
  }
  /**
   * Whether the loop must stop before its next call: a cancel was asked, or the run is no longer
   * running (ended elsewhere: reclaimed, cancelled). One round trip, no record parsed.
   */
  stopRequested(runId: string): Promise<boolean> {
    return stopRequested(this.#context, runId);
  }
  /** A stop and the holder of a takeover asked of the run, in one read (the loop's safe points). */
  interruptions(runId: string): Promise<{ stop: boolean; takeoverBy: string | undefined }> {
    return interruptions(this.#context, runId);
  }
  /**
   * Status and deadline of many runs in one pipelined round trip (the lease upkeep's read); a run
   * that does not exist is absent from the map.
   */
  runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus; deadlineAtMs: number }>> {
    return runStates(this.#context, runIds);
  }
  /** The run, or undefined; with `tenant`, another tenant's run reads as absent. */
  getRun(runId: string, tenant?: string): Promise<RunView | undefined> {
    return getRun(this.#context, runId, tenant);
  }
  /** The session's runs in submission order. */
  listRuns(tenant: string, sessionId: string): Promise<RunView[]> {
    return listRuns(this.#context, tenant, sessionId);
  }
  /** A page of the tenant's runs, newest first, filtered (`GET /v1/runs`). */
  listTenantRuns(tenant: string, query: TenantRunQuery): Promise<TenantRunPage> {
    return listTenantRuns(this.#context, tenant, query);
  }

  // Runs: status changes

  /**
   * `queued → running` for the job of `execution`, owned by `ownerToken`. A stale job (another
   * execution) or a run running under another owner is refused, unless `takeOver` is set for a
   * stalled job of the current execution (BullMQ handed it on from a dead worker; same attempt).
   * `workerId`, the claiming run worker's: the run's lease moves into its upkeep index.
   */
  claimRun(
    runId: string,
    execution: number,
    ownerToken: string,
    options: { takeOver?: boolean; workerId?: string } = {},
  ): Promise<ClaimTransition> {
    return claimRun(this.#context, runId, execution, ownerToken, options.takeOver === true, options.workerId);
  }
  /** `running → parked` by its owner (ends the execution; the lease stays). */
  parkRun(runId: string, ownerToken: string, detail: Record<string, unknown> = {}): Promise<RunTransition> {
    return suspendRun(this.#context, runId, ownerToken, 'parked', detail, '');
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
    return suspendRun(this.#context, runId, ownerToken, status, detail, waitingOn);
  }
  /**
   * `parked | waiting_child | waiting_user → queued` as a new execution; the caller enqueues the
   * job of `run.execution`. With `expected`, only from that status; with `waitingOn`, only a run
   * waiting on that run (a child's end resumes its own parent, once).
   */
  requeueRun(runId: string, options: RequeueOptions = {}): Promise<RunTransition<'queued'>> {
    return requeueRun(this.#context, runId, options);
  }
  /**
   * `running → queued` by its owner, at the same execution: the owner is cleared so
   * the next claim of that execution's job takes the run over at once; the lease stays for it.
   * With `maxHandbacks`, a run handed back that often already is refused (`stale_execution`) and
   * left running for the caller to fail. An accepted release's `detail` is the run's hand-backs
   * so far, as text.
   */
  releaseRun(
    runId: string,
    ownerToken: string,
    options: { detail?: Record<string, unknown>; maxHandbacks?: number } = {},
  ): Promise<RunTransition<string>> {
    return releaseRun(this.#context, runId, ownerToken, options);
  }
  /** `running → succeeded | failed | cancelled` by its owner. */
  /**
   * `attempts`: the run's attempt as its owner claimed it (it names the run's keys, and
   * cannot move while the owner holds the run — only a retry of an end changes it); without it,
   * it is read from the record first.
   */
  finishRun(runId: string, ownerToken: string, end: RunEnd, attempts?: number): Promise<RunTransition> {
    return finishRun(this.#context, runId, ownerToken, end, attempts);
  }
  /**
   * Cancels: a queued, parked or waiting run ends `cancelled` now (`detail: 'cancelled'`; the
   * caller releases its lease); a running run gets its cancel flag (`'cancel_requested'`).
   */
  cancelRun(
    tenant: string,
    runId: string,
    message = 'cancelled by request',
  ): Promise<RunTransition<'cancelled' | 'cancel_requested'>> {
    return cancelRun(this.#context, tenant, runId, message);
  }
  /**
   * The sweeper's end: fails a run that has not ended, whoever owns it (`reclaimed` past the
   * worker retry limit, `deadline_exceeded` past its deadline). A run worker ends its own run
   * with {@link finishRun} (owner-checked), an escaped error included. With
   * `expectedExecution`, a run that has moved to another execution is left alone.
   */
  failRun(
    runId: string,
    reason: SweptFailure,
    options: {
      expectedExecution?: number;
      message?: string;
      /** The run's step index where it failed, where the caller knows it (`runErrorSchema`). */
      step?: number;
    } = {},
  ): Promise<RunTransition<'failed'>> {
    return failRun(this.#context, runId, reason, options);
  }
  /**
   * A failed run as a new attempt: attempt + 1, a new execution, `queued`, on a fresh transcript
   * that holds the input and a note of the effects earlier attempts dispatched; the
   * failed attempt's transcript is kept under its number (`RunTranscripts.loadAttempt`).
   */
  retryRun(tenant: string, runId: string): Promise<RunTransition<'queued'>> {
    return retryRun(this.#context, tenant, runId);
  }

  // Runs: what the owner adds as it goes

  /** Adds to a running run's usage, by its owner. Cost in integer micro-USD. */
  addUsage(runId: string, ownerToken: string, delta: Partial<RunUsage>): Promise<RunTransition> {
    return addUsage(this.#context, runId, ownerToken, delta);
  }
  /**
   * ADR-0177: marks a running run's outcome unverified, by its owner, with the exhausted
   * acquisition's last error (its stable code and message); the run view shows it whatever the end.
   */
  markUnverified(runId: string, ownerToken: string, error: UnverifiedError): Promise<RunTransition> {
    return markUnverified(this.#context, runId, ownerToken, error);
  }
  /**
   * Notes the contract version of the browser tools a running run's execution offers,
   * by its owner; the run view shows the latest as `browser_tools_version`.
   */
  noteBrowserTools(runId: string, ownerToken: string, version: string): Promise<RunTransition> {
    return noteBrowserTools(this.#context, runId, ownerToken, version);
  }
  /** The run loop's stored state (the loop breaker's snapshot), or undefined before any was saved. */
  loadLoopState(runId: string): Promise<unknown> {
    return loadLoopState(this.#context, runId);
  }
  /** Saves the run loop's state, by the run's owner only; a lost run refuses (`ok: false`). */
  saveLoopState(runId: string, ownerToken: string, state: unknown): Promise<{ ok: boolean }> {
    return saveLoopState(this.#context, runId, ownerToken, state);
  }

  // Steps

  /**
   * Writes a step and appends its `step.started` / `step.ended` event in one script, by the run's
   * owner (a `waiting_approval` step: for the run parked on that approval). An ended step is final.
   */
  recordStep(
    ownerToken: string,
    step: StepRecord,
    options: StepWriteOptions = {},
  ): Promise<StepWriteOutcome> {
    return recordStep(this.#context, ownerToken, step, options);
  }
  /** The run's steps after `afterSeq` in `seq` order, at most `limit` (≤ 100). The caller checks the tenant. */
  listSteps(runId: string, afterSeq: number, limit: number): Promise<StepPage> {
    return listSteps(this.#context, runId, afterSeq, limit);
  }

  /** The run's downloads, oldest first. The caller checks the tenant. */
  listRunFiles(runId: string): Promise<RunFile[]> {
    return readRunFiles(this.#context.redis, this.#context.keys, runId);
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
  /**
   * A screenshot this run named that no browser worker took (its preview call was refused) is
   * noted `failed` with `reason`; a name a worker noted is left as it is.
   */
  noteScreenshotMissing(runId: string, name: string, reason: ScreenshotFailure): Promise<void> {
    return noteScreenshotMissing(this.#context.redis, this.#context.keys, runId, name, reason);
  }
  /** An approval's preview this run named, `pending` before it is asked for (see notePreviewPending). */
  notePreviewPending(runId: string, name: string): Promise<void> {
    return notePreviewPending(this.#context.redis, this.#context.keys, runId, name);
  }
  getApproval(tenant: string, approvalId: string): Promise<ApprovalView | undefined> {
    return getApproval(this.#context, tenant, approvalId);
  }
  /** A run of the tenant with its pending approvals (`GET /v1/runs/:id`). */
  getRunDetail(
    runId: string,
    tenant: string,
  ): Promise<{ run: RunView; pendingApprovals: ApprovalView[] } | undefined> {
    return getRunDetail(this.#context, runId, tenant);
  }
  /** Pending approvals of the tenant, or of one of its runs. */
  async listPendingApprovals(tenant: string, runId?: string): Promise<ApprovalView[]> {
    if (runId === undefined) return listTenantPendingApprovals(this.#context, tenant);
    return (await this.getRunDetail(runId, tenant))?.pendingApprovals ?? [];
  }
  listApprovals(runId: string): Promise<ApprovalView[]> {
    return listRunApprovals(this.#context, runId);
  }
  /**
   * A run's approvals of one status (or `any`), oldest first, each with the grant it gave; none for
   * a run of another tenant or none at all.
   */
  async listRunApprovalsWithGrants(
    tenant: string,
    runId: string,
    status: ApprovalListStatus,
  ): Promise<ApprovalView[] | undefined> {
    const run = await this.getRun(runId, tenant);
    if (!run) return undefined;
    const approvals = (await listRunApprovals(this.#context, runId)).filter(
      (approval) => status === 'any' || approval.status === status,
    );
    return this.withGrants(runId, await withNotedCards(this.#context, approvals));
  }
  /** `approvals` (all of run `runId`) with the grants they gave: one read of the run's grants. */
  async withGrants(runId: string, approvals: ApprovalView[]): Promise<ApprovalView[]> {
    if (!approvals.some((approval) => approval.grant_id)) return approvals;
    const grants = new Map((await listGrants(this.#context, runId)).map((grant) => [grant.id, grant]));
    return approvals.map((approval) => ({
      ...approval,
      grant: approval.grant_id ? (grants.get(approval.grant_id) ?? null) : null,
    }));
  }
  /**
   * `by` is the principal deciding; a string is a trusted in-process decider (any principal of the
   * tenant). The API passes `{by, ownRunsOnly}` for a key without `approvals:any`.
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
  /**
   * A hand-back: `holder` gives the run's page back and its `person` approval is approved with
   * what the data plane counted; the run resumes when it was its last pending approval.
   */
  handBack(tenant: string, approvalId: string, by: string, handBack: HandBack): Promise<ApprovalDecision> {
    return decideApproval(this.#context, tenant, approvalId, { approved: true, by, handBack });
  }

  // A person on the page (person_control)

  takeOverRun(runId: string, request: TakeOverRequest): Promise<TakeOver> {
    return takeOverRun(this.#context, runId, request);
  }
  releaseTakeover(
    runId: string,
    tenant: string,
    principal: string,
    holder: string,
    createdApprovalId?: string,
  ): Promise<void> {
    return releaseTakeover(this.#context, runId, tenant, principal, holder, createdApprovalId);
  }
  takeoverRequested(runId: string): Promise<{ holder: string; atMs: number } | undefined> {
    return takeoverRequested(this.#context, runId);
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
  /** The shard channel notified after each append to the run's events. */
  eventsChannel(runId: string): string {
    return eventsChannel(this.#context, runId);
  }
  /** One of the API key's `max` open event streams, held for `ttlMs` unless renewed; false past `max`. */
  /** The plain channel each status event of the tenant's runs is published on (`includes/emit.lua`). */
  tenantRunEventsChannel(tenant: string): string {
    return this.#context.keys.tenantRunEvents(tenant);
  }
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
