import { z } from 'zod';
import {
  ApiError,
  type ApprovalView,
  approvalCardSchema,
  approvalViewSchema,
  type GrantView,
  grantViewSchema,
  jsonDepthProblem,
  type LedgerEntry,
  ledgerEntrySchema,
  microUsdToUsd,
  type RunEvent,
  type RunStatus,
  type RunView,
  runEventSchema,
  runStatusSchema,
  runViewSchema,
} from '../contracts/index.js';

/**
 * Redis replies of the run store turned into the contract types. Every record is parsed by its
 * schema from libs/contracts on the way out of Redis, so a malformed record fails loudly here
 * instead of deep in a worker.
 */

/** A run as stored: its view, and the owner token that only the store and its owner compare. */
export interface StoredRun {
  run: RunView;
  /** The running worker's token; empty when no worker owns the run. */
  ownerToken: string;
}

/** `[field, value, field, value…]` (HGETALL inside a script) → a record. */
export function fieldsToRecord(flat: ReadonlyArray<string | number>): Record<string, string> {
  const record: Record<string, string> = {};
  for (let i = 0; i + 1 < flat.length; i += 2) record[String(flat[i])] = String(flat[i + 1]);
  return record;
}

function jsonOrNull(text: string | undefined): unknown {
  return text === undefined || text === '' ? null : JSON.parse(text);
}

/** The stored limits with their cost limit in USD beside the micro-USD figure. */
function limitsView(limits: unknown): unknown {
  if (!limits || typeof limits !== 'object') return limits;
  const micro = (limits as { max_cost_micro_usd?: unknown }).max_cost_micro_usd;
  return { ...limits, max_cost_usd: typeof micro === 'number' ? microUsdToUsd(micro) : null };
}

/**
 * A stored record that cannot be parsed (malformed, or nested past what the parsers take, as the
 * code earlier could store): a stable `record_unreadable` naming it, never a stack.
 */
export function unreadableRecord(kind: string, id: string, cause: unknown): ApiError {
  return new ApiError('record_unreadable', `${kind} ${id} is stored in a form that cannot be read`, false, {
    cause,
  });
}

export function parseRun(fields: Record<string, string>): StoredRun | undefined {
  if (!fields.id) return undefined;
  try {
    return parseRunFields(fields);
  } catch (error) {
    throw unreadableRecord('run', fields.id, error);
  }
}

/**
 * A run record is read by the view's schema but for `input` and `result`. JSON.parse made
 * those, so they are JSON by construction; zod's `z.json()` walked them again, recursively, and
 * that walk was most of a read's cost (23 of 27 µs a record, measured) on a path that reads the
 * run back after every transition. What the walk also did — refuse a value nested past what a
 * reader takes (older code could store one), at whatever depth the call stack gave
 * out — {@link READ_MAX_DEPTH} does, iteratively and at a depth that does not depend on the stack.
 */
const storedRunSchema = runViewSchema.extend({ input: z.unknown(), result: z.unknown() });

/**
 * The deepest stored input or result read: far past what a writer takes (a run's input, 33 levels)
 * and well inside what the recursive steps after the read (the response's encoding, canonical
 * JSON) take on Node's default stack (a 2,000-level value overflows it).
 */
const READ_MAX_DEPTH = 1_000;

function storedJson(text: string | undefined, field: string): unknown {
  const value = jsonOrNull(text);
  const problem = jsonDepthProblem(value, READ_MAX_DEPTH);
  if (problem) throw new Error(`${field}: ${problem}`);
  return value;
}

function parseRunFields(fields: Record<string, string>): StoredRun {
  const reason = fields.error_reason ?? '';
  // The schema checks every field but the two JSON values, which storedJson bounds (see above).
  const run = storedRunSchema.parse({
    id: fields.id,
    tenant: fields.tenant,
    principal: fields.principal,
    session_id: fields.session_id,
    agent_id: fields.agent_id,
    agent_version: fields.agent_version,
    browser_profile_id: fields.profile_id || null,
    parent_run_id: fields.parent_run_id || null,
    waiting_on_run_id: fields.waiting_on || null,
    // Set by a hand-back that waits on something, cleared by the next claim.
    waiting_for: (fields.status === 'queued' && fields.waiting_for) || null,
    status: fields.status,
    attempt: Number(fields.attempt),
    execution: Number(fields.execution),
    input: storedJson(fields.input, 'input'),
    limits: limitsView(jsonOrNull(fields.limits)),
    usage: {
      steps: Number(fields.steps),
      model_calls: Number(fields.model_calls),
      tool_calls: Number(fields.tool_calls),
      cost_micro_usd: Number(fields.cost_micro_usd),
    },
    cancel_requested: fields.cancel_requested === '1',
    deadline_at_ms: Number(fields.deadline_at),
    created_at_ms: Number(fields.created_at),
    updated_at_ms: Number(fields.updated_at),
    ended_at_ms: fields.ended_at ? Number(fields.ended_at) : null,
    result: storedJson(fields.result, 'result'),
    // The field keeps its stored name (`error_reason`, written by every ending script since the
    // first version); it holds the run's error code.
    error: reason
      ? {
          code: reason,
          message: fields.error_message ?? '',
          step: fields.error_step ? Number(fields.error_step) : null,
        }
      : null,
    unverified: fields.unverified === '1',
    unverified_error: jsonOrNull(fields.unverified_error),
    // Noted by an execution that offered browser tools; absent on every other run.
    browser_tools_version: fields.browser_tools || null,
  }) as RunView;
  return { run, ownerToken: fields.owner ?? '' };
}

export function parseRunStatus(value: string): RunStatus | undefined {
  const parsed = runStatusSchema.safeParse(value);
  return parsed.success ? parsed.data : undefined;
}

interface StoredApproval {
  id: string;
  run_id: string;
  tenant: string;
  invocation_id: string;
  tool: string;
  arguments: string;
  status: string;
  created_at: number;
  decided_at?: number;
  decided_by?: string;
  reason?: string;
  grant_id?: string;
  /** The card as JSON; absent on approvals written before it. */
  card?: string;
  kind?: string;
  /** A `person` approval's state, as an object (absent on an action's). */
  person?: Record<string, unknown>;
}

/** A `person` approval's state with every field it may not have yet read as null. */
function personOf(stored: Record<string, unknown> | undefined) {
  if (!stored || typeof stored !== 'object') return null;
  const field = (name: string) => stored[name] ?? null;
  return {
    reason: typeof stored.reason === 'string' ? stored.reason : '',
    expires_at_ms: Number(stored.expires_at_ms ?? 0),
    holder: field('holder'),
    since_ms: field('since_ms'),
    until_ms: field('until_ms'),
    start_url: field('start_url'),
    ended_at_ms: field('ended_at_ms'),
    inputs: field('inputs'),
    end_url: field('end_url'),
  };
}

export function parseApproval(json: string): ApprovalView {
  const stored = JSON.parse(json) as StoredApproval;
  return approvalViewSchema.parse({
    id: stored.id,
    run_id: stored.run_id,
    tenant: stored.tenant,
    invocation_id: stored.invocation_id,
    tool: stored.tool,
    arguments: jsonOrNull(stored.arguments),
    status: stored.status,
    created_at_ms: stored.created_at,
    decided_at_ms: stored.decided_at ?? null,
    decided_by: stored.decided_by ?? null,
    reason: stored.reason ?? null,
    grant_id: stored.grant_id ?? null,
    // A card that does not read as one shows as none rather than hiding the approval.
    card: approvalCardSchema.safeParse(jsonOrNull(stored.card)).data ?? null,
    kind: stored.kind === 'person' ? 'person' : 'action',
    person: stored.kind === 'person' ? personOf(stored.person) : null,
  });
}

interface StoredGrant {
  id: string;
  run_id: string;
  approval_id: string;
  attempt: number;
  created_at: number;
  expires_at: number;
  max_actions: number;
  used: number;
}

export function parseGrant(json: string): GrantView {
  const stored = JSON.parse(json) as StoredGrant;
  return grantViewSchema.parse({
    id: stored.id,
    run_id: stored.run_id,
    approval_id: stored.approval_id,
    created_at_ms: stored.created_at,
    expires_at_ms: stored.expires_at,
    max_actions: stored.max_actions,
    used_actions: stored.used,
  });
}

interface StoredInvocation {
  invocation_id: string;
  attempt: number;
  step: number;
  index: number;
  tool: string;
  state: string;
  result: string;
  started_at: number;
  updated_at: number;
}

export function parseLedgerEntry(json: string): LedgerEntry {
  const stored = JSON.parse(json) as StoredInvocation;
  return ledgerEntrySchema.parse({
    invocation_id: stored.invocation_id,
    attempt: stored.attempt,
    step: stored.step,
    index: stored.index,
    tool: stored.tool,
    state: stored.state,
    result: jsonOrNull(stored.result),
    started_at_ms: stored.started_at,
    updated_at_ms: stored.updated_at,
  });
}

/** One XRANGE entry: `[id, [field, value, …]]`. */
export function parseEvent([id, flat]: [string, string[]]): RunEvent {
  const fields = fieldsToRecord(flat);
  return runEventSchema.parse({
    id,
    type: fields.type,
    // An event's time is its id's milliseconds, unless the id had to be Redis's own
    // (`includes/emit.lua`): then `at` says it.
    at_ms: fields.at === undefined ? Number(id.slice(0, id.indexOf('-'))) : Number(fields.at),
    data: jsonOrNull(fields.data) ?? {},
  });
}
