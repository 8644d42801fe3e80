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

/**
 * What the ledger keeps of a call's result (issue 13: `redis_bytes_per_run`). The transcript holds
 * the answer the model read; the ledger's copy is for a replay after a crash between the two
 * writes, a retry's note of earlier effects (it reads ok and code) and whoever lists the ledger. A
 * browser call's observation is the page as it was then, the heaviest part of a run: the ledger
 * keeps its URL and title only, and a replayed call tells the model to observe again.
 */
export function keptResult(result: unknown): unknown {
  const outcome = result as { ok?: unknown; result?: { observation?: unknown } } | null;
  const observation = outcome?.ok === true ? outcome.result?.observation : undefined;
  if (typeof observation !== 'object' || observation === null) return result;
  const { url, title } = observation as { url?: unknown; title?: unknown };
  return { ok: true, result: { page: { url, title } } };
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
  const [code, detail, entry] = await context.redis.recordInvocation(
    context.keys.run(runId),
    context.keys.ledger(runId),
    ownerToken,
    record.step,
    record.index,
    record.state,
    record.tool,
    record.result === undefined ? '' : JSON.stringify(keptResult(record.result)),
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
