import type { RunStatus } from './runs.js';

/**
 * The run state machine as data (DESIGN §3–4). **This table is the specification**: each
 * row is a status change one of the store's Lua scripts (`libs/store/lua/*.lua`) accepts today,
 * and `test/integration/run-transitions.test.ts` walks every (state, event) pair against a real
 * Redis and holds the scripts to it — a pair with a row is accepted and lands in the row's `to`,
 * any other is refused and writes nothing. The README's lifecycle diagram is generated from it
 * (`npx tsx scripts/lifecycle-diagram.ts --write`).
 *
 * A script that changes a run's status without a row here, or a row no script accepts, fails that
 * test: change the script and its row together.
 */

/**
 * Who may cause a transition:
 * - `api`: a REST call (submit, cancel, retry, an approval's decision);
 * - `owner`: the run worker holding the run (its owner token; a claim makes the claiming worker
 *   the owner). Every other worker's write is refused `not_owner`;
 * - `sweeper`: the maintenance role (reclaim, deadlines, stale approvals), whoever owns the run;
 * - `lifecycle`: the follow-up of another run's transition (a child's end resuming its parent, a
 *   parent's cancel cancelling its child), carried out by the lifecycle system.
 */
export const RUN_ACTORS = ['api', 'owner', 'sweeper', 'lifecycle'] as const;
export type RunActor = (typeof RUN_ACTORS)[number];

/**
 * What happens to a run, each named after the store call that makes it happen:
 * `submit` (submitRun), `claim` and `take_over` (claimRun, the latter for a stalled job of the
 * current execution: DESIGN §4.6), `park` (requestApproval: createApproval; suspendRun parks the
 * same way), `wait_child` and `wait_user` (suspendRun), `release` (releaseRun: the owner hands the
 * run back at the same execution), `resume` (requeueRun: a new execution), `approve` and `deny`
 * (decideApproval), `expire_approvals` (expireStaleApprovals), `cancel` (cancelRun),
 * `finish_succeeded`, `finish_failed`, `finish_cancelled` (finishRun, by the owner), `force_fail`
 * (failRun: the sweeper's end, whoever owns the run), `retry` (retryRun: a new attempt), and a
 * profile's line of runs: `wait_profile` (waitForProfile: a claimed run behind the run holding its
 * profile's turn waits, with no job) and `wake` (wakeRun: the run done with the page wakes the next,
 * as a new execution).
 */
export const RUN_EVENTS = [
  'submit',
  'claim',
  'take_over',
  'park',
  'wait_child',
  'wait_user',
  'release',
  'resume',
  'approve',
  'deny',
  'expire_approvals',
  'cancel',
  'finish_succeeded',
  'finish_failed',
  'finish_cancelled',
  'force_fail',
  'retry',
  'wait_profile',
  'wake',
] as const;
export type RunLifecycleEvent = (typeof RUN_EVENTS)[number];

/**
 * ADR-0127 d4, one column per status: whether a run in it still needs its page, so its lease is
 * kept and renewed. Running, queued to resume, or parked on its own approval (a person's too) needs
 * it; waiting on a child or a person away from the page, or ended, is done with it. The lifecycle
 * (closing a lease before the next run is woken) and the upkeep (renew or close) both read it.
 */
export const RUN_STATUS_NEEDS_PAGE = {
  queued: true,
  running: true,
  parked: true,
  waiting_child: false,
  waiting_user: false,
  succeeded: false,
  failed: false,
  cancelled: false,
} as const satisfies Record<RunStatus, boolean>;

/** Whether a run of `status` needs its page (a run that is gone does not). */
export function runNeedsPage(status: RunStatus | undefined): boolean {
  return status !== undefined && RUN_STATUS_NEEDS_PAGE[status];
}

/**
 * A run's state for the table: its status, or `null` before it exists (only `submit` applies).
 */
export type RunLifecycleState = RunStatus | null;

/**
 * What besides its status a script reads to decide a transition. Absent facts count as false.
 * - `cancelRequested`: a running run's cancel flag (set by `cancel`); a park or wait of a flagged
 *   run ends it `cancelled` instead (DESIGN §4.7: a cancel never waits on an approval).
 * - `otherApprovalPending`: the run has a pending approval besides the one being decided; a parked
 *   run resumes only when its last pending approval is decided.
 * - `waitingForProfile`: a queued run waits its turn on its profile (`waiting_for: "profile"`).
 */
export interface RunFacts {
  cancelRequested: boolean;
  otherApprovalPending: boolean;
  waitingForProfile: boolean;
}

export interface RunTransitionRow {
  from: RunLifecycleState;
  event: RunLifecycleEvent;
  to: RunStatus;
  by: readonly RunActor[];
  /** The facts the row needs, where its script reads more than the status; else any. */
  when?: Partial<RunFacts>;
  /** The Lua script (`libs/store/lua/<script>-<keys>.lua`) that accepts it. */
  script: string;
}

const WAITING = ['parked', 'waiting_child', 'waiting_user'] as const satisfies readonly RunStatus[];
const NOT_ENDED = ['queued', 'running', ...WAITING] as const satisfies readonly RunStatus[];

function row(
  from: RunLifecycleState,
  event: RunLifecycleEvent,
  to: RunStatus,
  by: readonly RunActor[],
  script: string,
  when?: Partial<RunFacts>,
): RunTransitionRow {
  return when ? { from, event, to, by, when, script } : { from, event, to, by, script };
}

/** A run's own owner suspends its execution; a flagged run ends `cancelled` there instead. */
function suspension(event: RunLifecycleEvent, to: RunStatus, script: string): RunTransitionRow[] {
  return [
    row('running', event, to, ['owner'], script, { cancelRequested: false }),
    row('running', event, 'cancelled', ['owner'], script, { cancelRequested: true }),
  ];
}

/**
 * A decision on a pending approval (decideApproval-4.lua): it resumes a parked run whose last
 * pending approval it was; under any other run that has not ended it is recorded and the run keeps
 * its status (the loop reads it when it meets the invocation again).
 */
function decision(event: 'approve' | 'deny'): RunTransitionRow[] {
  return [
    row('parked', event, 'queued', ['api'], 'decideApproval', { otherApprovalPending: false }),
    row('parked', event, 'parked', ['api'], 'decideApproval', { otherApprovalPending: true }),
    ...(['queued', 'running', 'waiting_child', 'waiting_user'] as const).map((status) =>
      row(status, event, status, ['api'], 'decideApproval'),
    ),
  ];
}

/** Every accepted status change, grouped by script. */
export const RUN_TRANSITIONS: readonly RunTransitionRow[] = Object.freeze([
  row(null, 'submit', 'queued', ['api'], 'submitRun'),
  row('queued', 'claim', 'running', ['owner'], 'claimRun'),
  // A take-over asked of a queued run is a plain claim.
  row('queued', 'take_over', 'running', ['owner'], 'claimRun'),
  row('running', 'take_over', 'running', ['owner'], 'claimRun'),
  ...suspension('park', 'parked', 'createApproval'),
  ...suspension('wait_child', 'waiting_child', 'suspendRun'),
  ...suspension('wait_user', 'waiting_user', 'suspendRun'),
  // Hand-backs are bounded by the caller (`maxHandbacks`): past it the release is refused and the
  // run stays running for its owner to fail.
  row('running', 'release', 'queued', ['owner'], 'releaseRun'),
  ...WAITING.map((status) => row(status, 'resume', 'queued', ['lifecycle'], 'requeueRun')),
  ...decision('approve'),
  ...decision('deny'),
  // The sweeper expires approvals left pending under a run that is not parked on them; the run
  // keeps its status. A parked run's approvals are left alone.
  ...(
    ['queued', 'running', 'waiting_child', 'waiting_user', 'succeeded', 'failed', 'cancelled'] as const
  ).map((status) => row(status, 'expire_approvals', status, ['sweeper'], 'expireStaleApprovals')),
  // A running run gets its cancel flag (its loop obeys it); any other run that has not ended ends now.
  row('running', 'cancel', 'running', ['api', 'lifecycle'], 'cancelRun'),
  ...(['queued', ...WAITING] as const).map((status) =>
    row(status, 'cancel', 'cancelled', ['api', 'lifecycle'], 'cancelRun'),
  ),
  row('running', 'finish_succeeded', 'succeeded', ['owner'], 'finishRun'),
  row('running', 'finish_failed', 'failed', ['owner'], 'finishRun'),
  row('running', 'finish_cancelled', 'cancelled', ['owner'], 'finishRun'),
  ...NOT_ENDED.map((status) => row(status, 'force_fail', 'failed', ['sweeper'], 'failRun')),
  row('failed', 'retry', 'queued', ['api'], 'retryRun'),
  // A flagged run is refused its wait: its execution goes on and ends it `cancelled`.
  row('running', 'wait_profile', 'queued', ['owner'], 'waitForProfile', { cancelRequested: false }),
  row('queued', 'wake', 'queued', ['lifecycle'], 'wakeRun', { waitingForProfile: true }),
]);

function holds(when: Partial<RunFacts> | undefined, facts: Partial<RunFacts>): boolean {
  if (!when) return true;
  return (Object.keys(when) as Array<keyof RunFacts>).every((fact) => (facts[fact] ?? false) === when[fact]);
}

/** The rows that apply to `event` from `from` under `facts` (at most one in a sound table). */
export function runTransitionsFrom(
  from: RunLifecycleState,
  event: RunLifecycleEvent,
  facts: Partial<RunFacts> = {},
): RunTransitionRow[] {
  return RUN_TRANSITIONS.filter((candidate) => candidate.from === from && candidate.event === event).filter(
    (candidate) => holds(candidate.when, facts),
  );
}

/**
 * The status `event` moves a run in `from` to, or undefined when the store refuses it (and writes
 * nothing). `facts` are what the script reads besides the status (see {@link RunFacts}).
 */
export function nextRunStatus(
  from: RunLifecycleState,
  event: RunLifecycleEvent,
  facts: Partial<RunFacts> = {},
): RunStatus | undefined {
  return runTransitionsFrom(from, event, facts)[0]?.to;
}
