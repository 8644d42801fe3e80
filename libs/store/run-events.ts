import type { RunEvent, RunEventType } from '../contracts/index.js';
import type { RunStoreContext } from './run-keys.js';
import { parseEvent } from './run-records.js';
import { isRefusalCode, type RunRefusal, refusal } from './run-transition.js';
import { slotBatch } from './slot-batch.js';

/**
 * A run's events: one capped Redis Stream per run. Status changes append theirs inside their own
 * scripts; the loop appends its own through `appendEvent`, as the run's owner.
 */

const STREAM_ID = /^\d+-\d+$/;

/** Whether `value` is a Redis Stream id (`1700000000000-0`), as an SSE `Last-Event-ID` must be. */
export function isEventId(value: string): boolean {
  return STREAM_ID.test(value) && value.length <= 41;
}

/**
 * The shard channel on which every script that appends to the run's stream publishes (see
 * `lua/includes/emit.lua`): the events key with `:notify` for `:events`, so the same hash tag.
 */
export function eventsChannel(context: RunStoreContext, runId: string): string {
  return context.keys.events(runId).replace(/:events$/, ':notify');
}

/**
 * Sorted set: the open event streams of one API key, each scored by its expiry (epoch ms). It sits
 * in the API-key namespace under a brace name, as the tenant's key index does.
 */
function streamSlotsKey(context: RunStoreContext, keyId: string): string {
  return context.keys.apiKey(`{streams:${keyId}}`);
}

/**
 * Takes one of the key's `max` stream slots for `member` until `expiresAtMs`, in one MULTI:
 * expired slots (a replica that died holding them) are dropped first, then this one is added and
 * counted. Past `max` it is removed again and false is answered. Two racing for the last slot may
 * both be refused, never both admitted.
 */
export async function openStreamSlot(
  context: RunStoreContext,
  keyId: string,
  member: string,
  max: number,
  ttlMs: number,
): Promise<boolean> {
  const key = streamSlotsKey(context, keyId);
  const now = context.now();
  const replies = await context.redis
    .multi()
    .zremrangebyscore(key, '-inf', now)
    .zadd(key, now + ttlMs, member)
    .zcard(key)
    .pexpire(key, ttlMs)
    .exec();
  const count = Number(replies?.[2]?.[1] ?? Number.POSITIVE_INFINITY);
  if (count <= max) return true;
  await context.redis.zrem(key, member);
  return false;
}

/** Renews open slots (the keep-alive's), one pipeline for all of a process's streams. */
export async function renewStreamSlots(
  context: RunStoreContext,
  slots: ReadonlyArray<{ keyId: string; member: string }>,
  ttlMs: number,
): Promise<void> {
  if (slots.length === 0) return;
  const expiresAtMs = context.now() + ttlMs;
  const pipeline = slotBatch(context.redis);
  for (const { keyId, member } of slots) {
    const key = streamSlotsKey(context, keyId);
    pipeline.zadd(key, 'XX', expiresAtMs, member).pexpire(key, ttlMs);
  }
  await pipeline.exec();
}

export async function closeStreamSlot(
  context: RunStoreContext,
  keyId: string,
  member: string,
): Promise<void> {
  await context.redis.zrem(streamSlotsKey(context, keyId), member);
}

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
