import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  RUN_EVENTS,
  RUN_TRANSITIONS,
  type RunFacts,
  type RunLifecycleEvent,
  type RunLifecycleState,
  type RunTransitionRow,
  runTransitionsFrom,
} from '../../libs/contracts/index.js';
import { idempotentRunId, ProfileTurns, RunKeys, RunStore } from '../../libs/store/index.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

/**
 * The run state machine is the table in libs/contracts/run-lifecycle.ts, and the store's
 * scripts accept exactly that table. Every (state, event) pair is tried on a real Redis: the run is
 * brought into the state through the store's own calls, the event's store call is made, and it must
 * be accepted and land in the row's `to` when the table has a row, and be refused — writing nothing
 * to the run's record, approvals or events — when it has none.
 *
 * A new event needs one entry in INVOKE (the compiler asks for it); a row whose facts no situation
 * below has fails "exercises every row of the table" until a situation reaches it.
 */

const TENANT = 'acme';

/** What a store call answered: accepted (a transition, or a decision recorded) or refused with a code. */
interface Outcome {
  accepted: boolean;
  code: string;
}

/** The one run a case works on, and the worker that last claimed it. */
interface WalkRun {
  runId: string;
  idempotencyKey: string;
  ownerToken: string;
}

/** How each event is caused through the store's public calls. */
type Invoke = (store: RunStore, run: WalkRun) => Promise<Outcome>;

function transition(answer: { ok: true; detail: string } | { ok: false; code: string }): Outcome {
  return answer.ok ? { accepted: true, code: answer.detail } : { accepted: false, code: answer.code };
}

let tokens = 0;
let sessionId = '';
let turns: ProfileTurns;

async function claim(store: RunStore, run: WalkRun, takeOver: boolean): Promise<Outcome> {
  const execution = (await store.getRun(run.runId))?.execution ?? 1;
  tokens += 1;
  const ownerToken = `worker-${tokens}`;
  const answer = await store.claimRun(run.runId, execution, ownerToken, { takeOver });
  if (answer.ok) run.ownerToken = ownerToken;
  return transition(answer);
}

/** The oldest approval of the run still pending, decided by the API. */
async function decide(store: RunStore, run: WalkRun, approved: boolean): Promise<Outcome> {
  const pending = (await store.listApprovals(run.runId)).find((approval) => approval.status === 'pending');
  if (!pending) return { accepted: false, code: 'not_found' };
  const answer = approved
    ? await store.approve(TENANT, pending.id, 'alice')
    : await store.deny(TENANT, pending.id, 'alice', 'not this one');
  return transition(answer);
}

const INVOKE: Record<RunLifecycleEvent, Invoke> = {
  submit: async (store, run) => {
    const { status } = await store.submitRun({
      tenant: TENANT,
      principal: 'alice',
      sessionId,
      input: { message: 'walk' },
      limits: TEST_RUN_LIMITS,
      timeoutMs: 600_000,
      idempotencyKey: run.idempotencyKey,
    });
    return { accepted: status === 'created', code: status };
  },
  claim: (store, run) => claim(store, run, false),
  take_over: (store, run) => claim(store, run, true),
  park: async (store, run) => {
    tokens += 1;
    const request = { invocationId: `inv-${tokens}`, tool: 'browser.act', arguments: {} };
    return transition((await store.requestApproval(run.runId, run.ownerToken, request)).transition);
  },
  wait_child: async (store, run) =>
    transition(await store.waitRun(run.runId, run.ownerToken, 'waiting_child', {}, 'run_child')),
  wait_user: async (store, run) => transition(await store.waitRun(run.runId, run.ownerToken, 'waiting_user')),
  release: async (store, run) => transition(await store.releaseRun(run.runId, run.ownerToken)),
  resume: async (store, run) => transition(await store.requeueRun(run.runId)),
  approve: (store, run) => decide(store, run, true),
  deny: (store, run) => decide(store, run, false),
  expire_approvals: async (store, run) => {
    const { expired } = await store.expireStaleApprovals(run.runId);
    return expired.length > 0
      ? { accepted: true, code: 'expired' }
      : { accepted: false, code: 'none_expired' };
  },
  cancel: async (store, run) => transition(await store.cancelRun(TENANT, run.runId)),
  finish_succeeded: async (store, run) =>
    transition(await store.finishRun(run.runId, run.ownerToken, { status: 'succeeded', result: 'done' })),
  finish_failed: async (store, run) =>
    transition(
      await store.finishRun(run.runId, run.ownerToken, {
        status: 'failed',
        code: 'model_error',
        message: 'the model failed',
        step: 1,
      }),
    ),
  finish_cancelled: async (store, run) =>
    transition(await store.finishRun(run.runId, run.ownerToken, { status: 'cancelled' })),
  force_fail: async (store, run) => transition(await store.failRun(run.runId, 'reclaimed')),
  retry: async (store, run) => transition(await store.retryRun(TENANT, run.runId)),
  wait_profile: async (_store, run) =>
    transition(
      await turns.waitForProfile(run.runId, run.ownerToken, { holderRunId: 'run_holder', ahead: 1 }),
    ),
  wake: async (_store, run) => transition(await turns.wake(run.runId)),
};

/** Every way the store says no; a refusal outside these is a bug in the store or in this walk. */
const REFUSAL_CODES = new Set([
  'not_found',
  'wrong_status',
  'not_owner',
  'stale_execution',
  'already_decided',
  'existing',
  'none_expired',
  'cancel_requested',
]);

interface Situation {
  label: string;
  state: RunLifecycleState;
  facts: Partial<RunFacts>;
  /** The events that bring a new run there, from nothing. */
  path: RunLifecycleEvent[];
}

// Every situation but the first carries a pending approval, so that approve, deny and
// expire_approvals have one to act on: the run parked once and was resumed without a decision.
const PENDING = ['submit', 'claim', 'park', 'resume'] as const satisfies RunLifecycleEvent[];

const SITUATIONS: Situation[] = [
  { label: 'no run yet', state: null, facts: {}, path: [] },
  { label: 'queued', state: 'queued', facts: {}, path: [...PENDING] },
  {
    label: 'queued, waiting for its profile',
    state: 'queued',
    facts: { waitingForProfile: true },
    path: [...PENDING, 'claim', 'wait_profile'],
  },
  { label: 'running', state: 'running', facts: {}, path: [...PENDING, 'claim'] },
  {
    label: 'running, cancel requested',
    state: 'running',
    facts: { cancelRequested: true },
    path: [...PENDING, 'claim', 'cancel'],
  },
  { label: 'parked', state: 'parked', facts: {}, path: ['submit', 'claim', 'park'] },
  {
    label: 'parked, another approval pending',
    state: 'parked',
    facts: { otherApprovalPending: true },
    path: [...PENDING, 'claim', 'park'],
  },
  { label: 'waiting_child', state: 'waiting_child', facts: {}, path: [...PENDING, 'claim', 'wait_child'] },
  { label: 'waiting_user', state: 'waiting_user', facts: {}, path: [...PENDING, 'claim', 'wait_user'] },
  { label: 'succeeded', state: 'succeeded', facts: {}, path: [...PENDING, 'claim', 'finish_succeeded'] },
  { label: 'failed', state: 'failed', facts: {}, path: [...PENDING, 'claim', 'finish_failed'] },
  { label: 'cancelled', state: 'cancelled', facts: {}, path: [...PENDING, 'claim', 'finish_cancelled'] },
];

/** The rows a situation can meet: those of its state whose facts it has. */
function rowsFor(situation: Situation, event: RunLifecycleEvent): RunTransitionRow[] {
  return runTransitionsFrom(situation.state, event, situation.facts);
}

describe('the run state machine: the store accepts exactly the transition table', () => {
  const prefix = `${uniquePrefix('run-transitions')}:`;
  const keys = new RunKeys(prefix);
  let redis: Redis;
  let store: RunStore;
  let nowMs = 1_800_000_000_000;
  let runs = 0;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-run-transitions');
    // Each call a millisecond later: approvals are ordered by their creation time.
    store = new RunStore(redis, prefix, () => {
      nowMs += 1;
      return nowMs;
    });
    turns = new ProfileTurns(redis, prefix, () => nowMs);
    sessionId = await createTestSession(store, TENANT, { instructions: 'walk' });
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  /** A new run brought into the situation's state; each step must be accepted on the way. */
  async function runIn(situation: Situation): Promise<WalkRun> {
    runs += 1;
    const idempotencyKey = `walk-${runs}`;
    const run: WalkRun = {
      runId: idempotentRunId(TENANT, sessionId, idempotencyKey),
      idempotencyKey,
      ownerToken: 'worker-none',
    };
    for (const event of situation.path) {
      const outcome = await INVOKE[event](store, run);
      if (!outcome.accepted)
        throw new Error(`${situation.label}: ${event} on the way was refused ${outcome.code}`);
    }
    expect(await statusOf(run)).toBe(situation.state);
    return run;
  }

  async function statusOf(run: WalkRun): Promise<RunLifecycleState> {
    return (await store.getRun(run.runId))?.status ?? null;
  }

  /** What a refusal must leave as it was: the run's record, its approvals and its events. */
  async function written(run: WalkRun): Promise<unknown> {
    const [record, approvals, events] = await Promise.all([
      redis.hgetall(keys.run(run.runId)),
      redis.hgetall(keys.approvals(run.runId)),
      redis.xlen(keys.events(run.runId)),
    ]);
    return { record, approvals, events };
  }

  it('has at most one row for any state, event and facts', () => {
    for (const situation of SITUATIONS)
      for (const event of RUN_EVENTS)
        expect(rowsFor(situation, event).length, `${situation.label}: ${event}`).toBeLessThanOrEqual(1);
  });

  it('exercises every row of the table', () => {
    const reached = new Set(
      SITUATIONS.flatMap((situation) => RUN_EVENTS.flatMap((event) => rowsFor(situation, event))),
    );
    expect(RUN_TRANSITIONS.filter((row) => !reached.has(row))).toEqual([]);
  });

  for (const situation of SITUATIONS) {
    describe(situation.label, () => {
      for (const event of RUN_EVENTS) {
        const to = rowsFor(situation, event)[0]?.to;
        const named = to ? `accepts ${event}, landing ${to}` : `refuses ${event} and writes nothing`;
        it(named, async () => {
          const run = await runIn(situation);
          const before = await written(run);
          const outcome = await INVOKE[event](store, run);
          if (to) {
            expect(outcome, `${situation.label}: ${event}`).toMatchObject({ accepted: true });
            expect(await statusOf(run)).toBe(to);
          } else {
            expect(outcome.accepted, `${situation.label}: ${event} answered ${outcome.code}`).toBe(false);
            expect(REFUSAL_CODES.has(outcome.code), `refusal code ${outcome.code}`).toBe(true);
            expect(await written(run)).toEqual(before);
          }
        });
      }
    });
  }

  describe('owner events from a worker that does not hold the run', () => {
    const fenced = RUN_TRANSITIONS.filter(
      (row) =>
        row.by.includes('owner') &&
        row.from === 'running' &&
        row.event !== 'claim' &&
        row.event !== 'take_over',
    );
    const running = SITUATIONS.filter((situation) => situation.state === 'running');
    for (const situation of running) {
      for (const event of new Set(fenced.map((row) => row.event))) {
        it(`${situation.label}: refuses ${event} not_owner and writes nothing`, async () => {
          const run = await runIn(situation);
          const before = await written(run);
          const outcome = await INVOKE[event](store, { ...run, ownerToken: 'worker-stale' });
          expect(outcome).toEqual({ accepted: false, code: 'not_owner' });
          expect(await written(run)).toEqual(before);
        });
      }
    }
  });
});
