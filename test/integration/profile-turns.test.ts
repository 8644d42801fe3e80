import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { RunLifecycle } from '../../libs/runtime/index.js';
import { ProfileTurns, RunStore } from '../../libs/store/index.js';
import { newSignInId, ProfileSignIns } from '../../libs/store/profile-sign-ins.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, submitStoreRun } from '../fixtures/run-store.js';

/**
 * Runs wait their turn for a profile: against a real Redis, runs of one profile go one
 * after another in submit order; a run behind another waits `queued` (`waiting_for: "profile"`)
 * with no job, and the run that is done with the page wakes the next — no polling.
 */
describe('a profile line of runs', () => {
  const prefix = uniquePrefix('profile-turns');
  let redis: Redis;
  let store: RunStore;
  let turns: ProfileTurns;
  let sessionId: string;
  const enqueued: RunView[] = [];
  let lifecycle: RunLifecycle;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-profile-turns');
    store = new RunStore(redis, `${prefix}:`);
    turns = new ProfileTurns(redis, `${prefix}:`);
    lifecycle = new RunLifecycle({
      store,
      turns,
      enqueue: async (run) => {
        enqueued.push(run);
      },
    });
    sessionId = await createTestSession(store, 'acme', { instructions: 'x', browserProfileId: 'shop' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix);
    await closeRedis(redis);
  });

  const submit = () => submitStoreRun(store, sessionId);
  const claim = async (run: RunView) => ran(await store.claimRun(run.id, run.execution, `owner-${run.id}`));
  const profile = { tenant: 'acme', id: 'shop' };

  it('lets the first claimed run go and lines the others up, in submit order, waiting for the profile', async () => {
    const [first, second, third] = [await submit(), await submit(), await submit()];
    if (!first || !second || !third) throw new Error('runs not submitted');
    // Claimed out of order: the third before the second.
    expect(await lifecycle.takeTurn(await claim(first), `owner-${first.id}`)).toBe('go');
    expect(await lifecycle.takeTurn(await claim(third), `owner-${third.id}`)).toBe('waiting');
    expect(await lifecycle.takeTurn(await claim(second), `owner-${second.id}`)).toBe('waiting');
    expect(await turns.line(profile)).toEqual([first.id, second.id, third.id]);

    const waiting = await store.getRun(third.id);
    expect(waiting).toMatchObject({ status: 'queued', waiting_for: 'profile', execution: 1 });
    const events = await store.readEvents(third.id);
    expect(events.map((event) => event.type)).toContain('run.waiting');
    expect(enqueued).toEqual([]);

    // The first ends: its turn passes to the second (submitted earlier than the third), as a new execution.
    const ended = ran(
      await store.finishRun(first.id, `owner-${first.id}`, { status: 'succeeded', result: 'done' }),
    );
    await lifecycle.followUp(ended, { ended: true });
    expect(enqueued.map((run) => [run.id, run.execution, run.waiting_for])).toEqual([[second.id, 2, null]]);
    expect(await store.getRun(third.id)).toMatchObject({ waiting_for: 'profile' });

    // The woken second goes; when it waits on a person (done with the page) the third is woken.
    const woken = enqueued[0];
    if (!woken) throw new Error('second not woken');
    expect(await lifecycle.takeTurn(await claim(woken), `owner-${woken.id}`)).toBe('go');
    const waitingUser = ran(await store.waitRun(second.id, `owner-${second.id}`, 'waiting_user'));
    await lifecycle.followUp(waitingUser);
    expect(enqueued.map((run) => run.id)).toEqual([second.id, third.id]);
    expect(await turns.line(profile)).toEqual([third.id]);
  });

  it('wakes a run whose turn passed between its place in the line and its wait', async () => {
    enqueued.length = 0;
    const [holder, late] = [await submit(), await submit()];
    if (!holder || !late) throw new Error('runs not submitted');
    for (const runId of await turns.line(profile)) await turns.pass(profile, runId);
    expect(await lifecycle.takeTurn(await claim(holder), `owner-${holder.id}`)).toBe('go');
    // The holder passes its turn after the late run found it running, before the late run's wait
    // is written: the pass finds nobody waiting to wake.
    const racing = new RunLifecycle({
      store,
      enqueue: async (run) => {
        enqueued.push(run);
      },
      turns: {
        take: (line, runId) => turns.take(line, runId),
        pass: (line, runId) => turns.pass(line, runId),
        first: (line) => turns.first(line),
        wake: (runId) => turns.wake(runId),
        lines: (cursor) => turns.lines(cursor),
        signInHolds: (holderId) => turns.signInHolds(holderId),
        waitForProfile: async (runId, owner, behind) => {
          await lifecycle.followUp(
            ran(await store.finishRun(holder.id, `owner-${holder.id}`, { status: 'succeeded', result: 1 })),
          );
          return turns.waitForProfile(runId, owner, behind);
        },
      },
    });
    expect(await racing.takeTurn(await claim(late), `owner-${late.id}`)).toBe('waiting');
    expect(enqueued.map((run) => [run.id, run.execution])).toEqual([[late.id, 2]]);
    expect(await store.getRun(late.id)).toMatchObject({ status: 'queued', waiting_for: null });
  });

  it('wakes, on a sweep, a waiter whose holder ended without passing the turn', async () => {
    enqueued.length = 0;
    for (const runId of await turns.line(profile)) await turns.pass(profile, runId);
    const [holder, waiter] = [await submit(), await submit()];
    if (!holder || !waiter) throw new Error('runs not submitted');
    expect(await lifecycle.takeTurn(await claim(holder), `owner-${holder.id}`)).toBe('go');
    expect(await lifecycle.takeTurn(await claim(waiter), `owner-${waiter.id}`)).toBe('waiting');
    // The holder's worker died after the end was written, before its follow-up.
    ran(await store.finishRun(holder.id, `owner-${holder.id}`, { status: 'succeeded', result: 'x' }));
    expect(enqueued).toEqual([]);
    let cursor = '0';
    do cursor = (await lifecycle.sweepTurns(cursor)).cursor;
    while (cursor !== '0');
    expect(enqueued.map((run) => [run.id, run.execution])).toEqual([[waiter.id, 2]]);
    expect(await turns.line(profile)).toEqual([waiter.id]);
  });

  it('never enqueues a run that waits its turn when its follow-up is carried out again', async () => {
    enqueued.length = 0;
    const waiting = (await store.getRun((await turns.line(profile))[0] ?? ''))?.status;
    expect(waiting).toBe('queued');
    const run = await submit();
    const claimed = await claim(run);
    expect(await lifecycle.takeTurn(claimed, `owner-${run.id}`)).toBe('waiting');
    await lifecycle.followUpById(run.id);
    expect(enqueued).toEqual([]);
  });

  it('follows up a holder that ended without passing its turn instead of waiting behind it', async () => {
    enqueued.length = 0;
    for (const runId of await turns.line(profile)) await turns.pass(profile, runId);
    const [holder, next] = [await submit(), await submit()];
    expect(await lifecycle.takeTurn(await claim(holder), `owner-${holder.id}`)).toBe('go');
    // Ended outside the lifecycle (or its worker died before the follow-up): still first in line.
    ran(await store.finishRun(holder.id, `owner-${holder.id}`, { status: 'succeeded', result: 'x' }));
    expect(await lifecycle.takeTurn(await claim(next), `owner-${next.id}`)).toBe('go');
    expect(await turns.line(profile)).toEqual([next.id]);
  });

  it('keeps the turn of a sign-in through a sweep while its page is still opening', async () => {
    enqueued.length = 0;
    for (const runId of await turns.line(profile)) await turns.pass(profile, runId);
    const signIns = new ProfileSignIns(redis, `${prefix}:`);
    const signInId = newSignInId();
    const sweep = async () => {
      let cursor = '0';
      do cursor = (await lifecycle.sweepTurns(cursor)).cursor;
      while (cursor !== '0');
    };
    // Recorded before it takes the turn: its lease and page take a second or more to open.
    await signIns.begin({
      id: signInId,
      tenant: profile.tenant,
      profileId: profile.id,
      principal: 'owner',
      url: 'https://example.test/login',
      createdAtMs: Date.now(),
      openUntilMs: Date.now() + 30_000,
    });
    expect(await turns.takeForSignIn(profile, signInId)).toEqual({ turn: true });
    const waiter = await submit();
    if (!waiter) throw new Error('run not submitted');
    expect(await lifecycle.takeTurn(await claim(waiter), `owner-${waiter.id}`)).toBe('waiting');
    await sweep();
    expect(await turns.line(profile)).toEqual([signInId, waiter.id]);
    expect(enqueued).toEqual([]);

    await signIns.opened(signInId, 'lse_opened', Date.now() + 60_000);
    expect(await signIns.get(profile.tenant, signInId)).toMatchObject({
      status: 'open',
      leaseId: 'lse_opened',
    });
    await sweep();
    expect(enqueued).toEqual([]);

    await signIns.ended(signInId, 'cancelled');
    await lifecycle.passTurnOf(profile, signInId);
    expect(enqueued.map((run) => run.id)).toEqual([waiter.id]);
    expect(await turns.line(profile)).toEqual([waiter.id]);
    for (const runId of await turns.line(profile)) await turns.pass(profile, runId);
  });
});
