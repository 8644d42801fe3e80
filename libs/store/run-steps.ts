import { PAGE_LIMIT_MAX, type RunStep, runStepSchema, type StepOutcome } from '../contracts/index.js';
import { packJson, unpackJson } from './packed-json.js';
import type { RunStoreContext } from './run-keys.js';
import { unreadableRecord } from './run-records.js';
import { isRefusalCode, type RunRefusal, refusal } from './run-transition.js';
import { readScreenshotNotes, withStepScreenshots } from './screenshot-states.js';

/**
 * What a run did, step by step: each model turn and each tool call of a run is one
 * record in the run's steps hash, ordered by the run's step-order list. Written by the run loop
 * through `lua/recordStep-5.lua`, which appends the step's event to the run's stream in the same
 * script, so a client following the stream never hears of a step it cannot read.
 */

/** A step as the loop writes it; the store gives it its `seq`. */
export type StepRecord = Omit<RunStep, 'seq'>;

export interface StepWriteOptions {
  /** Write only a step not yet recorded: a call's `started`, sent before the ledger says whether it is new. */
  onlyIfAbsent?: boolean;
  /**
   * The outcome the step's event tells where the record has no place for it (a model turn that
   * failed: the record keeps its usage, the event its code).
   */
  eventOutcome?: StepOutcome;
}

export type StepWriteOutcome = { ok: true; written: boolean; seq: number } | RunRefusal;

const STEP_ID = /^a(\d+)-(?:m(\d+)|t(\d+)-(\d+))$/;

/** The ledger's name of a tool call (`<run>-a<attempt>-s<turn>-i<index>`), as the run worker gives it. */
function derivedInvocationId(runId: string, attempt: number, turn: number, index: number): string {
  return `${runId}-a${attempt}-s${turn}-i${index}`;
}

/** Drops the fields whose value is null: the reader puts them back. */
function withoutNulls<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, field]) => field !== null)) as Partial<T>;
}

/**
 * The record as stored (`redis_bytes_per_run`): what its id, its key and its run already
 * say is left out — the id, run id, attempt, kind, turn and index, a tool call's invocation id
 * where it is the ledger's own — and so is every null field. {@link expandStep} puts them back.
 */
function compactStep(step: Omit<StepRecord, 'started_at_ms' | 'status'>): Record<string, unknown> {
  const { id: _id, run_id: _run, attempt, kind: _kind, turn, index, model, tool, ...times } = step;
  const stored: Record<string, unknown> = withoutNulls(times);
  if (model) stored.model = model;
  if (tool) {
    // A screenshot's status is the browser worker's note, read beside the step: never stored in it.
    const { invocation_id: invocationId, screenshot_status: _status, ...rest } = tool;
    stored.tool = {
      ...withoutNulls(rest),
      ...(invocationId !== derivedInvocationId(step.run_id, attempt, turn, index ?? 0)
        ? { invocation_id: invocationId }
        : {}),
    };
  }
  return stored;
}

/**
 * A stored record's fields: the script's line `<seq> <started_at_ms> <status>`, then the rest as
 * {@link compactStep} left it, packed or plain (`packed-json.ts`); or, stored earlier packed
 * them, one JSON object.
 */
function storedStep(stored: Buffer): Record<string, unknown> {
  if (stored[0] === '{'.charCodeAt(0)) return JSON.parse(stored.toString('utf8')) as Record<string, unknown>;
  const newline = stored.indexOf(0x0a);
  const [seq, startedAtMs, status] = stored.subarray(0, newline).toString('latin1').split(' ');
  return {
    seq: Number(seq),
    started_at_ms: Number(startedAtMs),
    status,
    ...unpackJson<Record<string, unknown>>(stored.subarray(newline + 1)),
  };
}

/** A stored record back in its whole shape, from its id and its run. */
function expandStep(runId: string, stepId: string, stored: Record<string, unknown>): unknown {
  const match = STEP_ID.exec(stepId);
  if (!match) return stored;
  const attempt = Number(match[1]);
  const turn = Number(match[2] ?? match[3]);
  const index = match[2] === undefined ? Number(match[4]) : null;
  const tool = stored.tool as Record<string, unknown> | undefined;
  return {
    id: stepId,
    run_id: runId,
    attempt,
    kind: index === null ? 'model' : 'tool',
    turn,
    index,
    ended_at_ms: null,
    duration_ms: null,
    model: null,
    ...stored,
    tool: tool
      ? {
          invocation_id: derivedInvocationId(runId, attempt, turn, index ?? 0),
          arguments: null,
          outcome: null,
          settle: null,
          postcondition: null,
          page: null,
          screenshot: null,
          screenshot_status: null,
          approval_id: null,
          ...tool,
        }
      : null,
  };
}

/**
 * The event's data (`redis_bytes_per_run`, a run's events are mostly step events): the
 * step's id; its tool when it starts; when it ends, its outcome's code if it failed (no code: it
 * succeeded) and its screenshot's name. Each said once: the rest is the step's own record, read
 * from `GET …/steps`.
 */
function stepEventData(step: StepRecord, eventOutcome: StepOutcome | undefined): Record<string, unknown> {
  const outcome = step.tool?.outcome ?? eventOutcome ?? null;
  return {
    step_id: step.id,
    ...(step.tool && step.status !== 'ended' ? { tool: step.tool.name } : {}),
    ...(outcome && !outcome.ok ? { code: outcome.code } : {}),
    ...(step.tool?.screenshot ? { screenshot: step.tool.screenshot } : {}),
  };
}

/**
 * Writes one step and appends its `step.started` / `step.ended` event, as the run's owner; a
 * `waiting_approval` step is written for the parked run, fenced by its pending approval instead
 * (the park cleared the owner). An ended step is final: writing it again answers `written: false`.
 */
export async function recordStep(
  context: RunStoreContext,
  ownerToken: string,
  step: StepRecord,
  options: StepWriteOptions = {},
): Promise<StepWriteOutcome> {
  const { keys } = context;
  const { started_at_ms: startedAtMs, status, ...rest } = step;
  if (!STEP_ID.test(step.id)) throw new RangeError(`a step id such as a1-m2 or a1-t2-0, got "${step.id}"`);
  const fence = status === 'waiting_approval' ? step.tool : null;
  if (status === 'waiting_approval' && !fence?.approval_id)
    throw new RangeError(`step ${step.id}: a step waiting on its approval names the approval`);
  const [code, detail] = await context.redis.recordStep(
    keys.run(step.run_id),
    keys.events(step.run_id),
    keys.steps(step.run_id),
    keys.stepOrder(step.run_id),
    keys.approvals(step.run_id),
    ownerToken,
    step.id,
    status,
    Math.trunc(startedAtMs),
    // Packed, it may be bytes: ioredis sends a Buffer as it is (scripts.ts types arguments as text).
    packJson(compactStep(rest)) as string,
    options.onlyIfAbsent ? 1 : 0,
    fence?.approval_id ?? '',
    fence?.invocation_id ?? '',
    JSON.stringify(stepEventData(step, options.eventOutcome)),
    context.now(),
  );
  if (code === 'ok' || code === 'unchanged') return { ok: true, written: code === 'ok', seq: Number(detail) };
  if (isRefusalCode(code)) return refusal(step.run_id, code, String(detail), 'running');
  throw new Error(`recordStep answered ${code}`);
}

/** A page of a run's steps in `seq` order; `nextCursor` is null on the last page. */
export interface StepPage {
  steps: RunStep[];
  nextCursor: string | null;
}

/**
 * The run's steps from `cursor` (a `seq` already read past; from the first when absent), at most
 * `limit` (≤ {@link PAGE_LIMIT_MAX}). The cursor is the last `seq` of the page before, as text.
 * Two reads: the ids of the page (one more, to know whether a page follows), then their records.
 */
export async function listSteps(
  context: RunStoreContext,
  runId: string,
  afterSeq: number,
  limit: number,
): Promise<StepPage> {
  if (!Number.isInteger(limit) || limit < 1 || limit > PAGE_LIMIT_MAX)
    throw new RangeError(`limit: expected 1 to ${PAGE_LIMIT_MAX}, got ${limit}`);
  if (!Number.isInteger(afterSeq) || afterSeq < 0)
    throw new RangeError(`afterSeq: expected a non-negative integer, got ${afterSeq}`);
  const ids = await context.redis.lrange(context.keys.stepOrder(runId), afterSeq, afterSeq + limit);
  const pageIds = ids.slice(0, limit);
  if (pageIds.length === 0) return { steps: [], nextCursor: null };
  const [records, notes] = await Promise.all([
    context.redis.hmgetBuffer(context.keys.steps(runId), ...pageIds),
    readScreenshotNotes(context.redis, context.keys, runId),
  ]);
  const steps: RunStep[] = [];
  records.forEach((stored, index) => {
    // An id in the order whose record is gone (expired apart): skipped, as the indexes are elsewhere.
    if (stored === null) return;
    try {
      const id = pageIds[index] ?? '';
      steps.push(runStepSchema.parse(expandStep(runId, id, storedStep(stored))));
    } catch (error) {
      throw unreadableRecord('step', `${runId}/${pageIds[index]}`, error);
    }
  });
  return {
    steps: withStepScreenshots(steps, notes),
    nextCursor: ids.length > limit ? String(afterSeq + limit) : null,
  };
}
