import type { RunStatus, RunView } from '../contracts/index.js';
import { fieldsToRecord, parseRun, parseRunStatus } from './run-records.js';

/** Why a run script wrote nothing. */
export type RunRefusalCode = 'not_found' | 'wrong_status' | 'not_owner' | 'stale_execution';

export interface RunRefusal {
  ok: false;
  code: RunRefusalCode;
  /** The run's status when it refused, where it exists. */
  status: RunStatus | undefined;
  message: string;
}

/**
 * The answer of a status change: the run as the script left it, or a refusal that wrote nothing.
 * A worker that meets `not_owner` has lost the run (another worker or the sweeper holds it) and
 * must stop writing to it.
 */
export type RunTransition<Detail extends string = string> =
  | { ok: true; detail: Detail; run: RunView }
  | RunRefusal;

const REFUSALS: ReadonlySet<string> = new Set<RunRefusalCode>([
  'not_found',
  'wrong_status',
  'not_owner',
  'stale_execution',
]);

export function isRefusalCode(code: string): code is RunRefusalCode {
  return REFUSALS.has(code);
}

export function refusal(
  runId: string,
  code: RunRefusalCode,
  statusText: string,
  expected: string,
): RunRefusal {
  const status = parseRunStatus(statusText);
  const messages: Record<RunRefusalCode, string> = {
    not_found: `run ${runId} not found`,
    wrong_status: `run ${runId} is ${statusText}; expected ${expected}`,
    not_owner: `run ${runId} is ${statusText} under another owner: this worker's token is stale, it writes nothing`,
    stale_execution: `run ${runId} has moved to another execution; this job is stale`,
  };
  return { ok: false, code, status, message: messages[code] };
}

/** Turns a script's `{code, detail, fields}` into a transition. */
export function toTransition<Detail extends string>(
  runId: string,
  reply: [string, string, Array<string | number>],
  expected: string,
): RunTransition<Detail> {
  const [code, detail, fields] = reply;
  if (code === 'ok') {
    const stored = parseRun(fieldsToRecord(fields));
    if (!stored) throw new Error(`run script for ${runId} answered ok without the run`);
    return { ok: true, detail: detail as Detail, run: stored.run };
  }
  if (isRefusalCode(code)) return refusal(runId, code, detail, expected);
  throw new Error(`run script for ${runId} answered ${code}`);
}
