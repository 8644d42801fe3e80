import type { InvocationState, LedgerEntry } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseLedgerEntry } from './run-records.js';
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
  const [code, detail, entry] = await context.redis.recordInvocation(
    context.keys.run(runId),
    context.keys.ledger(runId),
    ownerToken,
    record.step,
    record.index,
    record.state,
    record.tool,
    record.result === undefined ? '' : JSON.stringify(record.result),
    context.now(),
  );
  if (code === 'recorded' || code === 'unchanged' || code === 'refused') {
    return { ok: true, code, entry: entry ? parseLedgerEntry(entry) : undefined };
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
  const values = await context.redis.hvals(context.keys.ledger(runId));
  return values
    .map(parseLedgerEntry)
    .filter((entry) => attempt === undefined || entry.attempt === attempt)
    .sort((a, b) => a.attempt - b.attempt || a.step - b.step || a.index - b.index);
}
