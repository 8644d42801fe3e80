import type { Config } from '../../libs/config/index.js';
import { type RunView, runHasEnded } from '../../libs/contracts/index.js';
import {
  childLimits,
  childOutcome,
  type DelegateStep,
  delegateArgsSchema,
  delegationDepth,
  type Invocation,
  MAX_DELEGATION_DEPTH,
  resumeParentOf,
  runDefaultLimits,
} from '../../libs/runtime/index.js';
import type { RunStore } from '../../libs/store/index.js';
import { enqueueExecution, type RunsQueue } from '../../queues/index.js';
import { refusedUnlessOk } from './run-lost.js';

/** The run worker's children system: `agent.delegate` and the resume of a waiting parent. */
export interface ChildrenDeps {
  config: Config;
  store: RunStore;
  queue: RunsQueue;
}

/** A delegated child is never given less time than this, even near its parent's deadline. */
const CHILD_MIN_TIMEOUT_MS = 1_000;

/** A child's end resumes its waiting parent (whoever ended the child calls this). */
export function resumeParent(
  deps: Pick<ChildrenDeps, 'store' | 'queue'>,
  child: Pick<RunView, 'id' | 'parent_run_id' | 'status'>,
): Promise<'resumed' | 'not_waiting'> {
  return resumeParentOf({ store: deps.store, enqueue: (run) => enqueueExecution(deps.queue, run) }, child);
}

/**
 * `agent.delegate` for a running run: starts the invocation's child run in the same session (its
 * id derives from the invocation, so a resumed or re-run call finds the same child), then moves the
 * parent to `waiting_child` on it. A child that has ended already answers at once.
 */
export async function delegateToChild(
  deps: ChildrenDeps,
  run: RunView,
  ownerToken: string,
  invocation: Invocation,
  releasePage: () => Promise<void>,
): Promise<DelegateStep> {
  const args = delegateArgsSchema.safeParse(invocation.call.args);
  if (!args.success)
    return {
      kind: 'ended',
      outcome: { ok: false, code: 'invalid_arguments', message: `agent.delegate: ${args.error.message}` },
    };
  if ((await delegationDepth((id) => deps.store.getRun(id), run)) >= MAX_DELEGATION_DEPTH)
    return {
      kind: 'ended',
      outcome: {
        ok: false,
        code: 'delegation_too_deep',
        message: `runs nest at most ${MAX_DELEGATION_DEPTH} deep; answer this part yourself`,
      },
    };

  // Its usage as of now: the child's cost limit is carved from what the parent has left.
  const parent = (await deps.store.getRun(run.id)) ?? run;
  const submitted = await deps.store.submitRun({
    tenant: run.tenant,
    principal: run.principal,
    sessionId: run.session_id,
    input: { text: args.data.input, ...(args.data.script !== undefined ? { script: args.data.script } : {}) },
    limits: childLimits(parent, runDefaultLimits(deps.config.limits)),
    // A child never outlives its parent's deadline.
    timeoutMs: Math.max(CHILD_MIN_TIMEOUT_MS, run.deadline_at_ms - Date.now()),
    idempotencyKey: `delegate.${invocation.id}`,
    parentRunId: run.id,
  });
  const child = submitted.run;
  if (runHasEnded(child.status)) return { kind: 'ended', outcome: childOutcome(child) };

  const waiting = await deps.store.waitRun(
    run.id,
    ownerToken,
    'waiting_child',
    { child_run_id: child.id, invocation_id: invocation.id },
    child.id,
  );
  refusedUnlessOk(waiting, 'wait on child');
  if (!waiting.ok) return { kind: 'waiting', childRunId: child.id };
  if (waiting.detail === 'cancelled') {
    // A cancel asked while the parent ran ends it here; its child goes with it.
    await deps.store.cancelRun(run.tenant, child.id, 'its parent run was cancelled');
    return { kind: 'waiting', childRunId: child.id };
  }
  // ADR-0127 d4: a run waiting on its child is done with the page; it is sealed and closed before
  // the child can start, so the child (same profile) takes the page instead of being refused.
  await releasePage();
  if (child.status === 'queued') await enqueueExecution(deps.queue, child);
  // The child may have ended before the parent started waiting; then nobody else resumes it.
  const now = await deps.store.getRun(child.id);
  if (now && runHasEnded(now.status)) await resumeParent(deps, now);
  return { kind: 'waiting', childRunId: child.id };
}
