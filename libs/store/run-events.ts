import type { RunEvent, RunEventType } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseEvent } from './run-records.js';
import { isRefusalCode, type RunRefusal, refusal } from './run-transition.js';

/**
 * A run's events: one capped Redis Stream per run. Status changes append theirs inside their own
 * scripts; the loop appends its own through `appendEvent`, as the run's owner.
 */

const STREAM_ID = /^\d+-\d+$/;

export async function appendEvent(
  context: RunStoreContext,
  runId: string,
  ownerToken: string,
  type: RunEventType,
  data: Record<string, unknown>,
): Promise<{ ok: true; id: string } | RunRefusal> {
  const [code, detail] = await context.redis.appendEvent(
    context.keys.run(runId),
    context.keys.events(runId),
    ownerToken,
    type,
    JSON.stringify(data),
    context.now(),
  );
  if (code === 'ok') return { ok: true, id: detail };
  if (isRefusalCode(code)) return refusal(runId, code, detail, 'running');
  throw new Error(`appendEvent answered ${code}`);
}

/**
 * Events after `afterId` (exclusive; from the start when omitted), oldest first, at most `count`.
 * `afterId` is an SSE client's `Last-Event-ID`.
 */
export async function readEvents(
  context: RunStoreContext,
  runId: string,
  options: { afterId?: string; count?: number } = {},
): Promise<RunEvent[]> {
  const { afterId, count = 1_000 } = options;
  if (afterId !== undefined && !STREAM_ID.test(afterId)) {
    throw new RangeError(`an event id such as 1700000000000-0, got "${afterId}"`);
  }
  const entries = (await context.redis.xrange(
    context.keys.events(runId),
    afterId === undefined ? '-' : `(${afterId}`,
    '+',
    'COUNT',
    count,
  )) as Array<[string, string[]]>;
  return entries.map(parseEvent);
}
