import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunView } from '../../libs/contracts/index.js';
import { RunKeys, RunStore } from '../../libs/store/index.js';
import {
  type DeadlineSweepDeps,
  STALE_APPROVAL_SWEEP_START,
  sweepDeadlines,
  sweepStaleApprovals,
} from '../../libs/sweeper/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const TENANT = 'acme';
const TIMEOUT_MS = 60_000;

describe('the deadline sweep', () => {
  const base = uniquePrefix('run-deadlines');
  let redis: Redis;
  let cells = 0;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-deadlines');
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, base);
    await closeRedis(redis);
  });

  /** A store with a deadline index of its own and a clock the test moves. */
  async function cell(options: { browserProfileId?: string } = {}) {
    const prefix = `${base}:c${++cells}:`;
    const clock = { nowMs: 1_800_000_000_000 };
    const store = new RunStore(redis, prefix, () => clock.nowMs);
    const keys = new RunKeys(prefix);
    const sessionId = await createTestSession(store, TENANT, { instructions: 'answer', ...options });
    const submit = async (): Promise<RunView> =>
      (
        await store.submitRun({
          tenant: TENANT,
          principal: 'alice',
          sessionId,
          input: { message: 'hi' },
          limits: TEST_RUN_LIMITS,
          timeoutMs: TIMEOUT_MS,
        })
      ).run;
    const deps = (extra: Partial<DeadlineSweepDeps> = {}): DeadlineSweepDeps => ({
      store,
      ...extra,
    });
    const indexScore = async (runId: string) => {
      const score = await redis.zscore(keys.runDeadlines(), runId);
      return score === null ? null : Number(score);
    };
    const parked = async (owner = 'w1') => {
      const run = await submit();
      ran(await store.claimRun(run.id, 1, owner));
      const { approvalId, transition } = await store.requestApproval(run.id, owner, {
        invocationId: 'a1:1:0',
        tool: 'browser.act',
        arguments: { ref: 'e1' },
      });
      expect(ran(transition).status).toBe('parked');
      return { run, approvalId };
    };
    return { store, keys, clock, submit, deps, indexScore, parked };
  }

  it('indexes a submitted run at its deadline', async () => {
    const { submit, indexScore } = await cell();
    const run = await submit();
    expect(await indexScore(run.id)).toBe(run.deadline_at_ms);
  });

  it('fails a queued run past its deadline `deadline_exceeded`, and not a moment before', async () => {
    const { store, clock, submit, deps, indexScore } = await cell();
    const run = await submit();

    clock.nowMs = run.deadline_at_ms - 1;
    expect((await sweepDeadlines(deps())).failed).toEqual([]);
    expect((await store.getRun(run.id))?.status).toBe('queued');

    clock.nowMs = run.deadline_at_ms;
    const outcome = await sweepDeadlines(deps());
    expect(outcome.failed).toEqual([run.id]);
    expect(await store.getRun(run.id)).toMatchObject({
      status: 'failed',
      error: { code: 'deadline_exceeded' },
      ended_at_ms: run.deadline_at_ms,
    });
    expect((await store.readEvents(run.id)).map((event) => event.type).at(-1)).toBe('run.failed');
    // The ended run leaves the index in the same pass.
    expect(await indexScore(run.id)).toBeNull();
  });

  it("fails a parked run past its deadline, expires its pending approval and drops it from the tenant's pending list", async () => {
    const { store, keys, clock, deps, parked } = await cell();
    const { run, approvalId } = await parked();
    expect((await store.listPendingApprovals(TENANT)).map((approval) => approval.id)).toEqual([approvalId]);

    clock.nowMs = run.deadline_at_ms + 1;
    expect((await sweepDeadlines(deps())).failed).toEqual([run.id]);
    expect((await store.getRun(run.id))?.error?.code).toBe('deadline_exceeded');
    expect((await store.getApproval(TENANT, approvalId))?.status).toBe('expired');
    // Gone from the index itself, not only filtered on read.
    expect(await redis.zscore(keys.tenantApprovals(TENANT), approvalId)).toBeNull();
    expect(await store.listPendingApprovals(TENANT)).toEqual([]);
  });

  it("fails a running run whose worker died and refuses the old owner's next write", async () => {
    const { store, clock, submit, deps } = await cell();
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'dead-worker'));

    clock.nowMs = run.deadline_at_ms + 5_000;
    expect((await sweepDeadlines(deps())).failed).toEqual([run.id]);
    expect((await store.getRun(run.id))?.status).toBe('failed');
    expect(await store.addUsage(run.id, 'dead-worker', { steps: 1 })).toMatchObject({ ok: false });
    expect(
      await store.finishRun(run.id, 'dead-worker', { status: 'succeeded', result: 'late' }),
    ).toMatchObject({ ok: false });
    expect(await store.getRun(run.id)).toMatchObject({
      status: 'failed',
      result: null,
      usage: { steps: 0 },
      error: { code: 'deadline_exceeded' },
    });
  });

  it('re-indexes a retried run at its new deadline', async () => {
    const { store, clock, submit, deps, indexScore } = await cell();
    const run = await submit();
    clock.nowMs = run.deadline_at_ms;
    expect((await sweepDeadlines(deps())).failed).toEqual([run.id]);
    expect(await indexScore(run.id)).toBeNull();

    clock.nowMs += 10_000;
    const retried = ran(await store.retryRun(TENANT, run.id));
    expect(retried.deadline_at_ms).toBe(clock.nowMs + TIMEOUT_MS);
    expect(await indexScore(run.id)).toBe(retried.deadline_at_ms);
  });

  it('leaves the index alone when a retry is refused', async () => {
    const { store, clock, submit, indexScore } = await cell();
    const run = await submit();
    clock.nowMs += 30_000;
    expect(await store.retryRun(TENANT, run.id)).toMatchObject({ ok: false, code: 'wrong_status' });
    expect(await indexScore(run.id)).toBe(run.deadline_at_ms);
  });

  it('does not fail a retried run by its old index score, and fails it at its new deadline', async () => {
    const { store, keys, clock, submit, deps, indexScore } = await cell();
    const run = await submit();
    clock.nowMs += 1_000;
    ran(await store.failRun(run.id, 'reclaimed'));
    clock.nowMs += 1_000;
    const retried = ran(await store.retryRun(TENANT, run.id));
    // An index that lags the record: the entry still carries the first attempt's deadline.
    await redis.zadd(keys.runDeadlines(), run.deadline_at_ms, run.id);

    clock.nowMs = run.deadline_at_ms;
    const outcome = await sweepDeadlines(deps());
    expect(outcome.failed).toEqual([]);
    expect(outcome.rescheduled).toEqual([run.id]);
    expect(await store.getRun(run.id)).toMatchObject({ status: 'queued', attempt: 2 });
    expect(await indexScore(run.id)).toBe(retried.deadline_at_ms);

    clock.nowMs = retried.deadline_at_ms;
    expect((await sweepDeadlines(deps())).failed).toEqual([run.id]);
    expect(await store.getRun(run.id)).toMatchObject({
      status: 'failed',
      attempt: 2,
      error: { code: 'deadline_exceeded' },
    });
  });

  it('removes the entry of a run that ended, and of one never written, without failing anything', async () => {
    const { store, keys, clock, submit, deps, indexScore } = await cell();
    const run = await submit();
    ran(await store.claimRun(run.id, 1, 'w1'));
    ran(await store.finishRun(run.id, 'w1', { status: 'succeeded', result: 'done' }));
    const ghost = 'run_000000000000000ghost';
    await redis.zadd(keys.runDeadlines(), run.deadline_at_ms, ghost);

    clock.nowMs = run.deadline_at_ms + 1;
    const outcome = await sweepDeadlines(deps());
    expect(outcome.failed).toEqual([]);
    expect(outcome.removed.sort()).toEqual([run.id, ghost].sort());
    expect(await indexScore(run.id)).toBeNull();
    expect(await indexScore(ghost)).toBeNull();
    expect(await store.getRun(run.id)).toMatchObject({ status: 'succeeded', result: 'done' });
  });

  it('looks at no more than its batch per pass, earliest deadlines first', async () => {
    const { store, clock, submit, deps } = await cell();
    const runs: RunView[] = [];
    for (let i = 0; i < 5; i++) {
      runs.push(await submit());
      clock.nowMs += 1;
    }
    clock.nowMs += TIMEOUT_MS;

    const passes: string[][] = [];
    for (let pass = 0; pass < 4; pass++) passes.push((await sweepDeadlines(deps({ batchSize: 2 }))).failed);
    const ids = runs.map((run) => run.id);
    expect(passes).toEqual([ids.slice(0, 2), ids.slice(2, 4), ids.slice(4), []]);
    for (const run of runs) expect((await store.getRun(run.id))?.status).toBe('failed');
  });

  it('calls onRunEnded once for each run it fails, with the failed run', async () => {
    const { store, clock, submit, deps } = await cell();
    const first = await submit();
    const second = await submit();
    const ended = await submit();
    ran(await store.cancelRun(TENANT, ended.id));
    clock.nowMs += TIMEOUT_MS;

    const seen: RunView[] = [];
    const onRunEnded = async (run: RunView) => {
      seen.push(run);
    };
    await sweepDeadlines(deps({ onRunEnded }));
    await sweepDeadlines(deps({ onRunEnded }));
    expect(seen.map((run) => run.id).sort()).toEqual([first.id, second.id].sort());
    for (const run of seen)
      expect(run).toMatchObject({ status: 'failed', error: { code: 'deadline_exceeded' } });
  });

  it('tells onRunEnded of each run it fails, and a failing hook stops no other run', async () => {
    const { store, clock, submit, deps, indexScore } = await cell({ browserProfileId: 'prof-deadline' });
    const first = await submit();
    const second = await submit();
    clock.nowMs += TIMEOUT_MS;

    const told: string[] = [];
    const errors: string[] = [];
    const outcome = await sweepDeadlines(
      deps({
        onRunEnded: (run) => {
          told.push(run.id);
          throw new Error('lease release failed');
        },
        onError: (runId) => errors.push(runId),
      }),
    );
    expect(outcome.failed.sort()).toEqual([first.id, second.id].sort());
    expect(told.sort()).toEqual([first.id, second.id].sort());
    expect(errors.sort()).toEqual([first.id, second.id].sort());
    for (const run of [first, second]) {
      expect((await store.getRun(run.id))?.status).toBe('failed');
      expect(await indexScore(run.id)).toBeNull();
    }
  });
});

describe('the stale approval sweep', () => {
  const base = uniquePrefix('stale-approvals');
  let redis: Redis;
  let store: RunStore;
  let keys: RunKeys;
  const nowMs = 1_800_000_000_000;
  let sessionId: string;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-stale-approvals');
    store = new RunStore(redis, `${base}:`, () => nowMs);
    keys = new RunKeys(`${base}:`);
    sessionId = await createTestSession(store, TENANT, { instructions: 'answer' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, base);
    await closeRedis(redis);
  });

  async function parked(owner = 'w1') {
    const { run } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: null,
      limits: TEST_RUN_LIMITS,
      timeoutMs: TIMEOUT_MS,
    });
    ran(await store.claimRun(run.id, 1, owner));
    const { approvalId, transition } = await store.requestApproval(run.id, owner, {
      invocationId: 'a1:1:0',
      tool: 'browser.act',
      arguments: {},
    });
    ran(transition);
    return { run, approvalId };
  }

  /** Passes until a full cycle of the cursor is done; the approvals expired on the way. */
  async function fullCycle(batchSize = 2): Promise<{ expired: string[]; checked: number[] }> {
    const expired: string[] = [];
    const checked: number[] = [];
    let cursor = STALE_APPROVAL_SWEEP_START;
    for (let pass = 0; pass < 100; pass++) {
      const outcome = await sweepStaleApprovals({ store, cursor, batchSize });
      expired.push(...outcome.expired);
      checked.push(outcome.checked);
      cursor = outcome.cursor;
      if (outcome.cycleDone) break;
    }
    return { expired, checked };
  }

  it('expires the pending approval of a run no longer parked or no longer there, and leaves a parked one', async () => {
    const stillParked = await parked();
    const requeued = await parked();
    ran(await store.requeueRun(requeued.run.id, { expected: 'parked' }));
    const vanished = await parked();
    await redis.del(keys.run(vanished.run.id));

    const { expired } = await fullCycle();
    expect(expired.sort()).toEqual([requeued.approvalId, vanished.approvalId].sort());
    expect((await store.getApproval(TENANT, requeued.approvalId))?.status).toBe('expired');
    expect((await store.getApproval(TENANT, stillParked.approvalId))?.status).toBe('pending');
    for (const gone of [requeued.approvalId, vanished.approvalId]) {
      expect(await redis.zscore(keys.tenantApprovals(TENANT), gone)).toBeNull();
    }
    expect((await store.listPendingApprovals(TENANT)).map((approval) => approval.id)).toEqual([
      stillParked.approvalId,
    ]);
    // A stale approval can no longer be decided.
    expect(await store.approve(TENANT, requeued.approvalId, 'alice')).toMatchObject({
      ok: false,
      code: 'already_decided',
    });
    expect((await fullCycle()).expired).toEqual([]);
  });

  it('checks at most its batch of runs per pass, and every indexed run over a full cycle', async () => {
    const stale: string[] = [];
    for (let i = 0; i < 6; i++) {
      const { run, approvalId } = await parked();
      ran(await store.requeueRun(run.id, { expected: 'parked' }));
      stale.push(approvalId);
    }
    const { expired, checked } = await fullCycle(2);
    expect(expired.sort()).toEqual(stale.sort());
    expect(Math.max(...checked)).toBe(2);
    expect(checked.reduce((sum, count) => sum + count, 0)).toBe(await redis.zcard(keys.runDeadlines()));
  });
});
