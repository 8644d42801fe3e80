import { type InvocationState, type LedgerEntry, ledgerEntrySchema } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { unreadableRecord } from './run-records.js';
import { isRefusalCode, type RunRefusal, refusal } from './run-transition.js';

/**
 * The invocation ledger (DESIGN §3): each tool call of a run, by attempt, step and index, with its
 * state. `dispatched` is the watermark — the effect may have happened — and the ledger never moves
 * back from it, so a run resumed after a crash never sends that effect again.
 */

export interface InvocationRecord {
  step: number;
  index: number;
  tool: string;
  state: InvocationState;
  /** The tool's result, kept from the last record that carried one. */
  result?: unknown;
}

export type LedgerOutcome =
  | {
      ok: true;
      /** `refused`: the entry is already past `state`; `entry` says where it is. */
      code: 'recorded' | 'unchanged' | 'refused';
      entry: LedgerEntry | undefined;
    }
  | RunRefusal;

/**
 * What the ledger keeps of a call's result (`redis_bytes_per_run`). The transcript holds
 * the answer the model read and the step record the page, settle and postcondition a person reads;
 * the ledger's copy is for a replay after a crash between the ledger and transcript writes, and for
 * a retry's note of earlier effects (it reads ok and code). Of a successful browser call it keeps
 * that it succeeded — a replayed call tells the model to observe again — so an entry fits in 64
 * bytes and the run's ledger stays in Redis's compact hash encoding.
 */
export function keptResult(result: unknown): unknown {
  const outcome = result as { ok?: unknown; result?: { observation?: unknown } } | null;
  const observation = outcome?.ok === true ? outcome.result?.observation : undefined;
  if (typeof observation !== 'object' || observation === null) return result;
  return { ok: true };
}

export async function recordInvocation(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  record: InvocationRecord,
): Promise<LedgerOutcome> {
  if (
    !Number.isInteger(record.step) ||
    record.step < 0 ||
    !Number.isInteger(record.index) ||
    record.index < 0
  ) {
    throw new RangeError(
      `an invocation's step and index are non-negative integers, got ${record.step}/${record.index}`,
    );
  }
  // The script answers the entry's field too (scripts.ts types the first three).
  const [code, detail, entry, field] = (await context.redis.recordInvocation(
    context.keys.run(runId),
    context.keys.ledger(runId),
    ownerToken,
    record.step,
    record.index,
    record.state,
    record.tool,
    record.result === undefined ? '' : JSON.stringify(keptResult(record.result)),
    context.now(),
  )) as unknown as [string, string, string, string | undefined];
  if (code === 'recorded' || code === 'unchanged' || code === 'refused') {
    return { ok: true, code, entry: entry ? ledgerEntry(runId, String(field), entry) : undefined };
  }
  if (isRefusalCode(code)) return refusal(runId, code, detail, 'running');
  throw new Error(`recordInvocation answered ${code}`);
}

/** The run's ledger, in (attempt, step, index) order; one attempt's entries when given. */
export async function listInvocations(
  context: RunStoreContext,
  runId: string,
  attempt?: number,
): Promise<LedgerEntry[]> {
  const fields = await context.redis.hgetall(context.keys.ledger(runId));
  return Object.entries(fields)
    .map(([field, json]) => ledgerEntry(runId, field, json))
    .filter((entry) => attempt === undefined || entry.attempt === attempt)
    .sort((a, b) => a.attempt - b.attempt || a.step - b.step || a.index - b.index);
}

/** The field of an invocation: `a<attempt>:<step>:<index>`. */
const LEDGER_FIELD = /^a(\d+):(\d+):(\d+)$/;

/**
 * A stored entry's line: `<state>,<started_at>,<ms from start to its last update>,<tool>`, then
 * `\n` and the result's JSON.
 */
const LEDGER_LINE = /^([a-z_]+),(\d+),(\d+),([^\n]*)(?:\n([\s\S]*))?$/;

/**
 * An entry as stored, with what its field and run say put back (attempt, step, index and the
 * invocation id `<run>-a<attempt>-s<step>-i<index>`, as the run worker names a call). Stored as a
 * line (`lua/recordInvocation-2.lua`); an entry stored as JSON earlier reads as it was.
 */
function ledgerEntry(runId: string, field: string, stored: string): LedgerEntry {
  try {
    const match = LEDGER_FIELD.exec(field);
    const [attempt, step, index] = [match?.[1], match?.[2], match?.[3]].map(Number);
    const identity = { invocation_id: `${runId}-a${attempt}-s${step}-i${index}`, attempt, step, index };
    const line = LEDGER_LINE.exec(stored);
    if (line) {
      const [, state, startedAt, updatedAfter, tool, result] = line;
      return ledgerEntrySchema.parse({
        ...identity,
        tool,
        state,
        result: result ? JSON.parse(result) : null,
        started_at_ms: Number(startedAt),
        updated_at_ms: Number(startedAt) + Number(updatedAfter),
      });
    }
    const json = JSON.parse(stored) as Record<string, unknown>;
    return ledgerEntrySchema.parse({
      ...identity,
      ...json,
      result: typeof json.result === 'string' && json.result !== '' ? JSON.parse(json.result) : null,
      started_at_ms: json.started_at,
      updated_at_ms: json.updated_at,
    });
  } catch (error) {
    throw unreadableRecord('invocation', `${runId}/${field}`, error);
  }
}
