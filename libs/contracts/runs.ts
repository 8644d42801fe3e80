import { z } from 'zod';
import { boundedJson, JSON_MAX_DEPTH } from './bounded-json.js';
import { RUN_ERROR_CODES, RUN_FAILURE_REASONS } from './errors.js';
import { recordIdSchema } from './ids.js';
import { OUTPUT_SCHEMA_BOUNDS } from './output-schema.js';
import { approvalCardSchema } from './run-steps.js';

/**
 * Runs and what hangs off them (DESIGN §3, §4): statuses, limits, usage, events, approvals, grants
 * and the invocation ledger, as the run store writes them and the API and workers read them.
 * Money is integer micro-USD (1 USD = 1_000_000) wherever it is stored or counted.
 */

/**
 * Scopes an API key may carry (DESIGN §3). A tenant's: `runs:write`, `runs:read`,
 * `approvals:write` (decide the approvals of one's own runs), `approvals:any` (with
 * `approvals:write`, those of any principal of the tenant) and `admin` (every tenant
 * scope). The fleet's: `operator`, the dashboard alone — it grants no tenant's
 * records, is never issued by a tenant admin and never shares a key with a tenant scope.
 */
export const TENANT_API_KEY_SCOPES = [
  'runs:write',
  'runs:read',
  'approvals:write',
  'approvals:any',
  'admin',
] as const;
export const OPERATOR_SCOPE = 'operator';
export const API_KEY_SCOPES = [...TENANT_API_KEY_SCOPES, OPERATOR_SCOPE] as const;
export const apiKeyScopeSchema = z.enum(API_KEY_SCOPES);
export type ApiKeyScope = z.output<typeof apiKeyScopeSchema>;
export const tenantApiKeyScopeSchema = z.enum(TENANT_API_KEY_SCOPES);

/** An operator key carries `operator` alone: a key is either the fleet's or a tenant's, never both. */
export function scopesMixOperator(scopes: readonly ApiKeyScope[]): boolean {
  return scopes.includes(OPERATOR_SCOPE) && scopes.some((scope) => scope !== OPERATOR_SCOPE);
}

export const tenantIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, _ or -, at most 64');
export const principalIdSchema = z
  .string()
  .regex(/^[A-Za-z0-9_.@-]{1,128}$/, 'letters, digits, _ . @ or -, at most 128');

/** Who a presented API key speaks for. */
export const apiKeyIdentitySchema = z.object({
  key_id: recordIdSchema,
  tenant: tenantIdSchema,
  principal: principalIdSchema,
  scopes: z.array(apiKeyScopeSchema).min(1),
});
export type ApiKeyIdentity = z.output<typeof apiKeyIdentitySchema>;

export const RUN_STATUSES = [
  'queued',
  'running',
  'parked',
  'waiting_child',
  'waiting_user',
  'succeeded',
  'failed',
  'cancelled',
] as const;
export const runStatusSchema = z.enum(RUN_STATUSES);
export type RunStatus = z.output<typeof runStatusSchema>;

/** The ends: nothing moves a run out of these except an explicit retry of a failed one. */
export const ENDED_RUN_STATUSES = [
  'succeeded',
  'failed',
  'cancelled',
] as const satisfies readonly RunStatus[];
export function runHasEnded(status: RunStatus): boolean {
  return (ENDED_RUN_STATUSES as readonly RunStatus[]).includes(status);
}

export const runFailureReasonSchema = z.enum(RUN_FAILURE_REASONS);

const count = z.number().int().nonnegative();
const microUsd = z.number().int().nonnegative();

/** Agent metadata: 32 levels, 16 KiB of JSON (well inside the 64 KiB body). */
export const AGENT_METADATA_BOUNDS = { maxDepth: JSON_MAX_DEPTH, maxBytes: 16 * 1024 } as const;

/** An agent definition; its version is the SHA-256 of its canonical JSON (DESIGN §3). */
export const agentDefinitionSchema = z.object({
  model: z.string().min(1).max(200),
  instructions: z.string().max(100_000),
  tools: z.array(z.string().min(1).max(128)).max(256).default([]),
  limits: z
    .object({
      max_steps: z.number().int().positive(),
      max_model_calls: z.number().int().positive(),
      max_tool_calls: z.number().int().positive(),
      max_cost_micro_usd: microUsd,
    })
    .partial()
    .default({}),
  /** Free-form, bounded: {@link AGENT_METADATA_BOUNDS}. */
  metadata: boundedJson(AGENT_METADATA_BOUNDS, z.record(z.string(), z.json())).default({}),
});
export type AgentDefinition = z.output<typeof agentDefinitionSchema>;

/** A content address: 64 lower-case hex characters of SHA-256. */
export const agentVersionSchema = z.string().regex(/^[0-9a-f]{64}$/, 'a SHA-256 in hex');

export const agentViewSchema = z.object({
  id: recordIdSchema,
  tenant: tenantIdSchema,
  latest_version: agentVersionSchema,
  created_at_ms: count,
  updated_at_ms: count,
});
export type AgentView = z.output<typeof agentViewSchema>;

/** A session pins its agent version and its profile binding at creation; neither changes. */
export const sessionViewSchema = z.object({
  id: recordIdSchema,
  tenant: tenantIdSchema,
  principal: principalIdSchema,
  agent_id: recordIdSchema,
  agent_version: agentVersionSchema,
  browser_profile_id: z.string().nullable(),
  /** The JSON Schema its runs' final answers take unless a run gives its own. */
  output_schema: z.record(z.string(), z.json()).nullable().default(null),
  created_at_ms: count,
});
export type SessionView = z.output<typeof sessionViewSchema>;

/** A submitted script (the scripted model's steps, a delegate's script inside them): 32 levels, 32 KiB. */
export const RUN_SCRIPT_BOUNDS = { maxDepth: JSON_MAX_DEPTH, maxBytes: 32 * 1024 } as const;
/** Characters of a run's input text. */
export const RUN_INPUT_MAX_CHARS = 32_768;
/**
 * A run's stored input, `{text, script?, output_schema?}`, checked by the store before it writes anything: the
 * script one level down, the text at up to four bytes a character. Children a run delegates are
 * held to it too, whoever wrote their script.
 */
export const RUN_INPUT_BOUNDS = {
  maxDepth: JSON_MAX_DEPTH + 1,
  maxBytes: RUN_SCRIPT_BOUNDS.maxBytes + RUN_INPUT_MAX_CHARS * 4 + OUTPUT_SCHEMA_BOUNDS.maxBytes + 1024,
} as const;

/** The limits pinned on a run at submission (from `ops/limits.yaml`, chosen by the API). */
export const runLimitsSchema = z.object({
  max_steps: z.number().int().positive(),
  max_model_calls: z.number().int().positive(),
  max_tool_calls: z.number().int().positive(),
  reserve_model_calls: count,
  reserve_tool_calls: count,
  /** Null: no cost limit. */
  max_cost_micro_usd: microUsd.nullable(),
  cost_reserve_micro_usd: microUsd,
});
export type RunLimits = z.output<typeof runLimitsSchema>;

/** The limits as the run view shows them: with the cost limit in USD ("30"; null: none). */
export const runLimitsViewSchema = runLimitsSchema.extend({ max_cost_usd: z.string().nullable() });

export const runUsageSchema = z.object({
  steps: count,
  model_calls: count,
  tool_calls: count,
  cost_micro_usd: microUsd,
});
export type RunUsage = z.output<typeof runUsageSchema>;

export const runErrorCodeSchema = z.enum(RUN_ERROR_CODES);

/**
 * Why a run ended `failed` or `cancelled` (truthful ends): the run failure reason or the
 * code of the tool whose failure ended it, with `step`: the run's step index where it happened —
 * the model turn, counted from 1 as the loop and the ledger count it (`usage.steps` after that
 * turn; an invocation's step; a script's step number). A tool failure names its call's turn; a
 * failure before or during a model call names the turn being asked for. Null where no turn is
 * known (an end the sweeper or a cancel writes).
 */
export const runErrorSchema = z.object({
  code: runErrorCodeSchema,
  message: z.string(),
  step: z.number().int().nonnegative().nullable(),
});
export type RunError = z.output<typeof runErrorSchema>;

/** ADR-0177: the last error of an exhausted acquisition that left the run's outcome unverified. */
export const unverifiedErrorSchema = z.object({
  invocation_id: z.string().max(256),
  code: z.string().max(128),
  message: z.string().max(1_000),
});
export type UnverifiedError = z.output<typeof unverifiedErrorSchema>;

/** What a succeeded run answered. */
export const runResultSchema = z.looseObject({
  answer: z.string(),
  /** The answer's JSON value, valid against the run's `output_schema`; only where the run had one. */
  output: z.json().optional(),
});

/** A run as the API and the workers see it. Never carries the owner token. */
export const runViewSchema = z.object({
  id: recordIdSchema,
  tenant: tenantIdSchema,
  principal: principalIdSchema,
  session_id: recordIdSchema,
  agent_id: recordIdSchema,
  agent_version: agentVersionSchema,
  browser_profile_id: z.string().nullable(),
  parent_run_id: recordIdSchema.nullable(),
  /** The child run a `waiting_child` run waits on. */
  waiting_on_run_id: recordIdSchema.nullable(),
  /**
   * What a `queued` run waits for before it can go on: `browser_worker` while its
   * profile's browser worker is gone or restarting; `profile` while another run holds its
   * profile's turn (it starts when that run is done with the page, in submit order). Null otherwise.
   */
  waiting_for: z.enum(['browser_worker', 'profile']).nullable().default(null),
  status: runStatusSchema,
  /** Explicit retries of a failed run; a resume after a park or a crash keeps it. */
  attempt: z.number().int().positive(),
  /** Each queued start or resume; part of the BullMQ job id. */
  execution: z.number().int().positive(),
  input: z.json(),
  limits: runLimitsViewSchema,
  usage: runUsageSchema,
  cancel_requested: z.boolean(),
  deadline_at_ms: count,
  created_at_ms: count,
  updated_at_ms: count,
  ended_at_ms: count.nullable(),
  /** A succeeded run's end: its final answer, and `output`, the answer's value where an output schema validated it. */
  result: runResultSchema.nullable(),
  error: runErrorSchema.nullable(),
  /** ADR-0177: an acquisition's bounded retry was exhausted in this run; stays true whatever its end. */
  unverified: z.boolean().default(false),
  unverified_error: unverifiedErrorSchema.nullable().default(null),
  /**
   * The contract version of the browser tools the run's model was offered (`1.3.0`), as
   * its latest execution that offered them noted it; null for a run offered no browser tools.
   */
  browser_tools_version: z.string().max(32).nullable().optional(),
});
export type RunView = z.output<typeof runViewSchema>;

/** The text a run was asked to do (its input's `text`, or the input itself when it is text). */
export function inputText(input: unknown): string {
  if (typeof input === 'string') return input;
  const text = (input as { text?: unknown } | null)?.text;
  return typeof text === 'string' ? text : '';
}

export const RUN_EVENT_TYPES = [
  'run.submitted',
  'run.claimed',
  'run.resumed',
  'run.parked',
  'run.waiting',
  'run.requeued',
  'run.succeeded',
  'run.failed',
  'run.cancelled',
  'run.cancel_requested',
  'run.retried',
  'approval.requested',
  'approval.approved',
  'approval.denied',
  'grant.used',
  // Written by the run loop with its step records: `data` names the step, `GET
  // /v1/runs/{id}/steps` has the whole of it.
  'step.started',
  'step.ended',
  /** A step run again by a later execution (a call let through by its approval). */
  'step.resumed',
  /** A failed acquisition attempt (ADR-0177): codes and numbers only, never page content. */
  'tool.acquire_attempt',
  /**
   * A person on the page: asked for (`browser.request_person`), taking the page over, handing it
   * back. Counts, times, holders and URLs only, never what the person typed.
   */
  'person.requested',
  'person.taken_over',
  'person.handed_back',
  'message',
] as const;
export const runEventTypeSchema = z.enum(RUN_EVENT_TYPES);
export type RunEventType = z.output<typeof runEventTypeSchema>;

/** One entry of a run's event stream; `id` is the Redis Stream id, usable as SSE `Last-Event-ID`. */
export const runEventSchema = z.object({
  id: z.string().regex(/^\d+-\d+$/),
  type: runEventTypeSchema,
  at_ms: count,
  data: z.record(z.string(), z.json()),
});
export type RunEvent = z.output<typeof runEventSchema>;

/**
 * A status event of one of the tenant's runs, as the tenant's event stream (`GET /v1/events`)
 * sends it: the run's own event (`id` is its id in the run's stream) with the run's id.
 */
export const tenantRunEventSchema = runEventSchema.extend({ run_id: recordIdSchema });
export type TenantRunEvent = z.output<typeof tenantRunEventSchema>;

export const INVOCATION_STATES = ['started', 'dispatched', 'completed', 'outcome_unknown'] as const;
export const invocationStateSchema = z.enum(INVOCATION_STATES);
export type InvocationState = z.output<typeof invocationStateSchema>;

/**
 * An effect an earlier attempt of a run dispatched (retry starts clean), told to the new
 * attempt in its fresh transcript so a model does not repeat it blindly. From the ledger and the
 * old transcript: never a typed text (it may be a password), never an evidence key.
 */
export const earlierEffectSchema = z.object({
  attempt: z.number().int().positive(),
  step: count,
  tool: z.string(),
  /** What it aimed at: a navigate's URL, an act's action and element as the page named it. */
  target: z.string(),
  /** `completed` or `failed <code>`; `outcome_unknown` or `dispatched` when it may have happened unanswered. */
  outcome: z.string(),
});
export type EarlierEffect = z.output<typeof earlierEffectSchema>;

/** One tool call in a run's ledger. `dispatched` is the watermark: the effect may have happened. */
export const ledgerEntrySchema = z.object({
  invocation_id: z.string(),
  attempt: z.number().int().positive(),
  step: count,
  index: count,
  tool: z.string(),
  state: invocationStateSchema,
  result: z.json().nullable(),
  started_at_ms: count,
  updated_at_ms: count,
});
export type LedgerEntry = z.output<typeof ledgerEntrySchema>;

/** A task grant is bounded (DESIGN §3): at most 30 minutes and 200 actions. */
export const GRANT_MAX_DURATION_MS = 30 * 60_000;
export const GRANT_MAX_ACTIONS = 200;

export const grantRequestSchema = z.object({
  duration_ms: z.number().int().positive().max(GRANT_MAX_DURATION_MS),
  max_actions: z.number().int().positive().max(GRANT_MAX_ACTIONS),
});
export type GrantRequest = z.output<typeof grantRequestSchema>;

export const grantViewSchema = z.object({
  id: z.string(),
  run_id: recordIdSchema,
  approval_id: recordIdSchema,
  created_at_ms: count,
  expires_at_ms: count,
  max_actions: z.number().int().positive(),
  used_actions: count,
});
export type GrantView = z.output<typeof grantViewSchema>;

export const APPROVAL_STATUSES = ['pending', 'approved', 'denied', 'expired'] as const;
export const approvalStatusSchema = z.enum(APPROVAL_STATUSES);
export type ApprovalStatus = z.output<typeof approvalStatusSchema>;

/**
 * An approval is `action` (a tool call waits for its owner's decision) or `person` (the run waits
 * for a person to take the page over and hand it back: asked by `browser.request_person`, or made
 * when its principal took a running run over).
 */
export const APPROVAL_KINDS = ['action', 'person'] as const;
export type ApprovalKind = (typeof APPROVAL_KINDS)[number];

/**
 * A `person` approval's state: why it was asked, until when a person may come (the run fails
 * `person_timeout` past it), and, once taken over, who holds the page and until when. At the hand
 * back: how long they held it, how many inputs they sent and the URL it was left at; never what
 * they typed.
 */
export const personControlSchema = z.object({
  reason: z.string(),
  expires_at_ms: count,
  holder: z.string().nullable(),
  since_ms: count.nullable(),
  until_ms: count.nullable(),
  start_url: z.string().nullable(),
  ended_at_ms: count.nullable(),
  inputs: count.nullable(),
  end_url: z.string().nullable(),
});
export type PersonControl = z.output<typeof personControlSchema>;

export const approvalViewSchema = z.object({
  id: recordIdSchema,
  run_id: recordIdSchema,
  tenant: tenantIdSchema,
  invocation_id: z.string(),
  tool: z.string(),
  arguments: z.json(),
  status: approvalStatusSchema,
  created_at_ms: count,
  decided_at_ms: count.nullable(),
  decided_by: z.string().nullable(),
  /** A denial's reason, handed to the model as the tool's result. */
  reason: z.string().nullable(),
  grant_id: z.string().nullable(),
  /** What will be acted on, for the person deciding (null for approvals written before it). */
  card: approvalCardSchema.nullable().default(null),
  kind: z.enum(APPROVAL_KINDS).default('action'),
  /** A `person` approval's state; null for an `action` one. */
  person: personControlSchema.nullable().default(null),
  /**
   * The task grant this approval gave (its bounds and how much of it is used), where it is told:
   * a decision's answer and a listing; null without a grant. Never stored in the approval.
   */
  grant: grantViewSchema.nullable().default(null),
});
export type ApprovalView = z.output<typeof approvalViewSchema>;

/** What `GET /v1/approvals` lists: one status, or `any`. Decided ones are listed by run only. */
export const APPROVAL_LIST_STATUSES = [...APPROVAL_STATUSES, 'any'] as const;
export type ApprovalListStatus = (typeof APPROVAL_LIST_STATUSES)[number];
