import { type RunView, runHasEnded } from '../contracts/index.js';
import {
  childLimits,
  childOutcome,
  type DelegateStep,
  delegateArgsSchema,
  delegationDepth,
  type Invocation,
  MAX_DELEGATION_DEPTH,
  runDefaultLimits,
} from '../runtime/index.js';
import type { ExecutionDeps } from './execution-deps.js';
import { refusedUnlessOk } from './run-lost.js';

/** The run worker's children system: `agent.delegate`; its consequences go through the lifecycle. */
export type ChildrenDeps = Pick<ExecutionDeps, 'config' | 'store' | 'lifecycle'>;

/** What the parent's execution does around a delegation. */
export interface DelegationHooks {
  /** Seals and closes the parent's page, once it waits (ADR-0127 d4). */
  releasePage(): Promise<void>;
  /** Told the parent as its wait left it when a cancel asked meanwhile ended it instead. */
  cancelled(parent: RunView): void;
}

/** A delegated child is never given less time than this, even near its parent's deadline. */
const CHILD_MIN_TIMEOUT_MS = 1_000;

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
  hooks: DelegationHooks,
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
  if (waiting.detail === 'cancelled') {
    // A cancel asked while the parent ran ends it here; its child goes with it.
    hooks.cancelled(waiting.run);
    await deps.lifecycle.cancel(run.tenant, child.id, 'its parent run was cancelled');
    return { kind: 'waiting', childRunId: child.id };
  }
  // ADR-0127 d4: a run waiting on its child is done with the page; it is sealed and closed before
  // the child can start, so the child (same profile) takes the page instead of being refused.
  await hooks.releasePage();
  if (child.status === 'queued') await deps.lifecycle.followUp(child);
  // The child may have ended before the parent started waiting; then nobody else resumes it.
  const now = await deps.store.getRun(child.id);
  if (now && runHasEnded(now.status)) await deps.lifecycle.followUp(now);
  return { kind: 'waiting', childRunId: child.id };
}
