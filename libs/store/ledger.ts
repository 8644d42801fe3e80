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
 * What the ledger keeps of a call's result (issue 13: `redis_bytes_per_run`). The transcript holds
 * the answer the model read; the ledger's copy is for a replay after a crash between the two
 * writes, a retry's note of earlier effects (it reads ok and code) and whoever lists the ledger. A
 * browser call's observation is the page as it was then, the heaviest part of a run: the ledger
 * keeps its URL and title and an act's postcondition result, and a replayed call tells the model to observe
 * again.
 */
export function keptResult(result: unknown): unknown {
  const outcome = result as { ok?: unknown; result?: { observation?: unknown } } | null;
  const observation = outcome?.ok === true ? outcome.result?.observation : undefined;
  if (typeof observation !== 'object' || observation === null) return result;
  const { url, title, condition } = observation as {
    url?: unknown;
    title?: unknown;
    condition?: { result?: unknown };
  };
  // An act's postcondition result stays: whether the page showed what the act waited for is how it
  // ended (its scope and timings are in the act's step record).
  return {
    ok: true,
    result: { page: { url, title }, ...(condition ? { condition: { result: condition.result } } : {}) },
  };
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
 * An entry as stored, with what its field and run say put back (attempt, step, index and the
 * invocation id `<run>-a<attempt>-s<step>-i<index>`, as the run worker names a call). An entry stored
 * whole, before issue 13, reads as it was.
 */
function ledgerEntry(runId: string, field: string, json: string): LedgerEntry {
  try {
    const match = LEDGER_FIELD.exec(field);
    const [attempt, step, index] = [match?.[1], match?.[2], match?.[3]].map(Number);
    const stored = JSON.parse(json) as Record<string, unknown>;
    return ledgerEntrySchema.parse({
      invocation_id: `${runId}-a${attempt}-s${step}-i${index}`,
      attempt,
      step,
      index,
      ...stored,
      result: typeof stored.result === 'string' && stored.result !== '' ? JSON.parse(stored.result) : null,
      started_at_ms: stored.started_at,
      updated_at_ms: stored.updated_at,
    });
  } catch (error) {
    throw unreadableRecord('invocation', `${runId}/${field}`, error);
  }
}
