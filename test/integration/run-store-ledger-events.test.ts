import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { type LedgerOutcome, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const TENANT = 'acme';
const EVENTS_CAP = 25;

function ledgerCode(outcome: LedgerOutcome): string {
  return outcome.ok ? `${outcome.code}:${outcome.entry?.state ?? 'absent'}` : outcome.code;
}

describe('the run store: the invocation ledger and run events', () => {
  const prefix = `${uniquePrefix('run-store-ledger')}:`;
  let redis: Redis;
  let store: RunStore;
  const nowMs = 1_800_000_000_000;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-store-ledger');
    store = new RunStore(redis, prefix, () => nowMs, { eventsCap: EVENTS_CAP });
    sessionId = await createTestSession(store, TENANT, { instructions: 'go' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  /** A run claimed by `owner`, through `on` (a store with a clock of its own) or the file's store. */
  async function runningRun(owner: string, on: RunStore = store): Promise<RunView> {
    const { run } = await on.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: {},
      limits: TEST_RUN_LIMITS,
      timeoutMs: 60_000,
    });
    return ran(await on.claimRun(run.id, 1, owner));
  }

  it('moves an invocation forward from started to dispatched to completed, idempotently', async () => {
    const run = await runningRun('w');
    const act = { step: 0, index: 0, tool: 'browser.act' };
    expect(ledgerCode(await store.recordInvocation(run.id, 'w', { ...act, state: 'started' }))).toBe(
      'recorded:started',
    );
    expect(ledgerCode(await store.recordInvocation(run.id, 'w', { ...act, state: 'started' }))).toBe(
      'unchanged:started',
    );
    expect(ledgerCode(await store.recordInvocation(run.id, 'w', { ...act, state: 'dispatched' }))).toBe(
      'recorded:dispatched',
    );
    expect(ledgerCode(await store.recordInvocation(run.id, 'w', { ...act, state: 'dispatched' }))).toBe(
      'unchanged:dispatched',
    );
    const done = await store.recordInvocation(run.id, 'w', {
      ...act,
      state: 'completed',
      result: { ok: true },
    });
    expect(done).toMatchObject({
      ok: true,
      code: 'recorded',
      entry: {
        invocation_id: `${run.id}-a1-s0-i0`,
        attempt: 1,
        step: 0,
        index: 0,
        tool: 'browser.act',
        state: 'completed',
        result: { ok: true },
      },
    });
    expect(ledgerCode(await store.recordInvocation(run.id, 'w', { ...act, state: 'dispatched' }))).toBe(
      'refused:completed',
    );
    // The call was counted once, when it was first recorded started.
    expect((await store.getRun(run.id))?.usage.tool_calls).toBe(1);
  });

  it("keeps a browser call's page, not its observation: the transcript holds what the model read", async () => {
    const run = await runningRun('w');
    const act = { step: 1, index: 0, tool: 'browser.act' };
    await store.recordInvocation(run.id, 'w', { ...act, state: 'started' });
    const observation = {
      url: 'https://shop.example/cart',
      title: 'Cart',
      text: 'Cart\nTwo items'.repeat(40),
      text_truncated: false,
      revision: 'r1',
      settle: null,
      elements: [{ ref: 'e1', role: 'button', name: 'Pay', state: {} }],
      window: { offset: 0, count: 1 },
      condition: { result: 'satisfied', scope: 'observation_window', observations: 1, elapsed_ms: 5 },
    };
    const done = await store.recordInvocation(run.id, 'w', {
      ...act,
      state: 'completed',
      result: { ok: true, result: { observation } },
    });
    // The observation is the transcript's and the page the step's: the ledger keeps that it succeeded.
    expect(done.ok && done.entry?.result).toEqual({ ok: true });
    const failed = { ok: false, code: 'element_not_found', message: 'no e9 in revision r1' };
    await store.recordInvocation(run.id, 'w', { ...act, index: 1, state: 'started' });
    await store.recordInvocation(run.id, 'w', { ...act, index: 1, state: 'completed', result: failed });
    // What the field already says (attempt, step, index) and the name built from it are not stored.
    const stored = await redis.hget(`${prefix}{run:${run.id}}:ledger`, 'a1:1:0');
    expect(stored).not.toContain(run.id);
    expect(stored).toMatch(/^completed,\d{13},\d+,browser\.act\n\{"ok":true\}$/);
    // Within 64 bytes: the run's ledger stays in Redis's compact hash encoding.
    expect(Buffer.byteLength(stored ?? '')).toBeLessThanOrEqual(64);
    const results = (await store.listInvocations(run.id)).map((entry) => entry.result);
    expect(results).toEqual([{ ok: true }, failed]);
  });

  it('never sets a dispatched invocation back to started, so a resumed run sees the effect may have happened', async () => {
    const run = await runningRun('first');
    const act = { step: 2, index: 1, tool: 'browser.act' };
    await store.recordInvocation(run.id, 'first', { ...act, state: 'started' });
    await store.recordInvocation(run.id, 'first', { ...act, state: 'dispatched' });
    // The first worker dies; another takes the stalled job over and replays the step.
    ran(await store.claimRun(run.id, 1, 'second', { takeOver: true }));
    const replay = await store.recordInvocation(run.id, 'second', { ...act, state: 'started' });
    expect(ledgerCode(replay)).toBe('refused:dispatched');
    const unknown = await store.recordInvocation(run.id, 'second', { ...act, state: 'outcome_unknown' });
    expect(ledgerCode(unknown)).toBe('recorded:outcome_unknown');
    expect(ledgerCode(await store.recordInvocation(run.id, 'second', { ...act, state: 'completed' }))).toBe(
      'refused:outcome_unknown',
    );
    expect((await store.listInvocations(run.id)).map((entry) => entry.state)).toEqual(['outcome_unknown']);
  });

  it('keeps an entry in 64 bytes and reads its times back (redis_bytes_per_run)', async () => {
    let clock = 1_800_000_000_000;
    const timed = new RunStore(redis, prefix, () => clock, { eventsCap: EVENTS_CAP });
    const run = await runningRun('w', timed);
    const call = { step: 1, index: 0, tool: 'browser.navigate' };
    await timed.recordInvocation(run.id, 'w', { ...call, state: 'started' });
    clock += 1_234;
    await timed.recordInvocation(run.id, 'w', {
      ...call,
      state: 'completed',
      result: { ok: true, result: { observation: { url: 'https://shop.example/', title: 'Shop' } } },
    });
    const stored = await redis.hget(`${prefix}{run:${run.id}}:ledger`, 'a1:1:0');
    expect(Buffer.byteLength(stored ?? '')).toBeLessThanOrEqual(64);
    expect(await redis.object('ENCODING', `${prefix}{run:${run.id}}:ledger`)).toBe('listpack');
    const [entry] = await timed.listInvocations(run.id);
    expect(entry).toMatchObject({
      state: 'completed',
      result: { ok: true },
      started_at_ms: 1_800_000_000_000,
      updated_at_ms: 1_800_000_001_234,
    });
  });

  it("tells an event's time by its stream id, and by its own field when the clock went back", async () => {
    let clock = 1_800_000_000_000;
    const timed = new RunStore(redis, prefix, () => clock, { eventsCap: EVENTS_CAP });
    const run = await runningRun('w', timed);
    clock -= 5_000; // another process's clock, behind the stream's last id
    await timed.appendEvent(run.id, 'w', 'message', { text: 'late clock' });
    const events = await timed.readEvents(run.id);
    expect(events.map((event) => event.at_ms)).toEqual([
      1_800_000_000_000, 1_800_000_000_000, 1_799_999_995_000,
    ]);
    // The first two carry no `at` field: their ids are their times.
    expect(events[0]?.id).toMatch(/^1800000000000-\d+$/);
    const raw = (await redis.xrange(`${prefix}{run:${run.id}}:events`, '-', '+')) as Array<
      [string, string[]]
    >;
    expect(raw.map(([, fields]) => fields.includes('at'))).toEqual([false, false, true]);
  });

  it('refuses ledger writes from a worker whose token is stale', async () => {
    const run = await runningRun('owner');
    const outcome = await store.recordInvocation(run.id, 'stale', {
      step: 0,
      index: 0,
      tool: 'browser.navigate',
      state: 'started',
    });
    expect(outcome).toMatchObject({ ok: false, code: 'not_owner' });
    expect(await store.listInvocations(run.id)).toEqual([]);
  });

  it('refuses to record an invocation that was never started', async () => {
    const run = await runningRun('w');
    expect(
      ledgerCode(
        await store.recordInvocation(run.id, 'w', { step: 0, index: 0, tool: 'x', state: 'dispatched' }),
      ),
    ).toBe('refused:absent');
    expect(await store.listInvocations(run.id)).toEqual([]);
  });

  it('lists invocations in step and index order, by attempt', async () => {
    const run = await runningRun('w');
    for (const [step, index] of [
      [1, 1],
      [0, 0],
      [1, 0],
      [10, 0],
      [2, 0],
    ] as const) {
      await store.recordInvocation(run.id, 'w', { step, index, tool: 't', state: 'started' });
    }
    const order = (await store.listInvocations(run.id, 1)).map((entry) => `${entry.step}.${entry.index}`);
    expect(order).toEqual(['0.0', '1.0', '1.1', '2.0', '10.0']);
    expect(await store.listInvocations(run.id, 2)).toEqual([]);
  });

  it('appends events of the loop for the owner only and reads them after an id', async () => {
    const run = await runningRun('w');
    const appended = await store.appendEvent(run.id, 'w', 'message', { tool: 'browser.observe' });
    expect(appended.ok).toBe(true);
    expect(await store.appendEvent(run.id, 'stale', 'message', { text: 'x' })).toMatchObject({
      ok: false,
      code: 'not_owner',
    });
    const all = await store.readEvents(run.id);
    expect(all.map((event) => event.type)).toEqual(['run.submitted', 'run.claimed', 'message']);
    expect(all[2]).toMatchObject({ type: 'message', at_ms: nowMs, data: { tool: 'browser.observe' } });
    const after = await store.readEvents(run.id, { afterId: all[0]?.id });
    expect(after.map((event) => event.type)).toEqual(['run.claimed', 'message']);
    expect(await store.readEvents(run.id, { afterId: all[2]?.id })).toEqual([]);
    await expect(store.readEvents(run.id, { afterId: 'nope' })).rejects.toThrow(RangeError);
  });

  it("caps a run's event stream, keeping the newest entries", async () => {
    const run = await runningRun('w');
    for (let i = 0; i < EVENTS_CAP + 10; i++) await store.appendEvent(run.id, 'w', 'message', { i });
    const events = await store.readEvents(run.id);
    expect(events).toHaveLength(EVENTS_CAP);
    expect(events.at(-1)?.data).toEqual({ i: EVENTS_CAP + 9 });
  });
});
