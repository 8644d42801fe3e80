import { z } from 'zod';
import { type RunLimits, type RunView, runHasEnded } from '../contracts/index.js';
import type { ToolDefinition, ToolOutcome } from './model.js';

/**
 * Delegation (DESIGN §3, §4): `agent.delegate` starts a child run in the parent's session; the
 * parent waits (`waiting_child`, its lease released: ADR-0127 d4, so the child can take the
 * profile's page) and resumes with the child's end, whatever it is, as the tool's result.
 */
export const DELEGATE_TOOL_NAME = 'agent.delegate';

/** How deep children may nest (a child of a child …): bounds a policy that delegates forever. */
export const MAX_DELEGATION_DEPTH = 4;

export const delegateArgsSchema = z.strictObject({
  /** What the child run is asked to do. */
  input: z.string().min(1).max(100_000),
  /** For agents on the `scripted` model: the child's own steps and answer. */
  script: z.json().optional(),
});
export type DelegateArgs = z.output<typeof delegateArgsSchema>;

export const DELEGATE_TOOL_DEFINITION: ToolDefinition = Object.freeze({
  name: DELEGATE_TOOL_NAME,
  description:
    'Hand a self-contained task to a child run in this session; you resume with its answer or its failure.',
  parameters: z.toJSONSchema(delegateArgsSchema) as Record<string, unknown>,
});

/** What asking for a child gives the loop: wait for it, or its end at once (it ended already). */
export type DelegateStep = { kind: 'waiting'; childRunId: string } | { kind: 'ended'; outcome: ToolOutcome };

/** The tool result a parent resumes with: the child's answer, or why it did not give one. */
export function childOutcome(child: RunView): ToolOutcome {
  const answer = (child.result as { answer?: unknown } | null)?.answer;
  if (child.status === 'succeeded')
    return { ok: true, result: { run_id: child.id, status: 'succeeded', answer: answer ?? null } };
  const reason = child.error?.code ?? child.status;
  return {
    ok: false,
    code: child.status === 'cancelled' ? 'child_cancelled' : 'child_failed',
    message: `child run ${child.id} ended ${child.status} (${reason}): ${child.error?.message ?? ''}`.trim(),
  };
}

/**
 * A child's limits: its own (`run_defaults`), with a cost limit carved from what its parent has
 * left (ADR-0130 d1) — never more than the parent could still spend.
 */
export function childLimits(parent: RunView, own: RunLimits): RunLimits {
  const parentMax = parent.limits.max_cost_micro_usd;
  if (parentMax === null) return own;
  const left = Math.max(0, parentMax - parent.usage.cost_micro_usd);
  const max = own.max_cost_micro_usd === null ? left : Math.min(own.max_cost_micro_usd, left);
  return {
    ...own,
    max_cost_micro_usd: max,
    cost_reserve_micro_usd: Math.min(own.cost_reserve_micro_usd, max),
  };
}

/** The store and queue calls a child's end needs to resume its parent (the run store fits `store`). */
export interface ParentResumeDeps {
  store: {
    requeueRun(
      runId: string,
      options: { expected: 'waiting_child'; waitingOn: string; detail: Record<string, unknown> },
    ): Promise<{ ok: true; run: RunView } | { ok: false }>;
  };
  enqueue(run: RunView): Promise<unknown>;
}

/**
 * Called by whoever ends a run (its worker, a cancel, the sweeper): a parent waiting on this
 * ended child is queued to resume, once (the requeue checks the status and the child it waits
 * on), and its next execution is enqueued. The parent does the same check right after it starts
 * waiting, so whichever of the two writes last sees the other: no parent is left waiting.
 */
export async function resumeParentOf(
  deps: ParentResumeDeps,
  child: Pick<RunView, 'id' | 'parent_run_id' | 'status'>,
): Promise<'resumed' | 'not_waiting'> {
  if (!child.parent_run_id || !runHasEnded(child.status)) return 'not_waiting';
  const requeued = await deps.store.requeueRun(child.parent_run_id, {
    expected: 'waiting_child',
    waitingOn: child.id,
    detail: { child_run_id: child.id, child_status: child.status },
  });
  if (!requeued.ok) return 'not_waiting';
  await deps.enqueue(requeued.run);
  return 'resumed';
}

/** How many parents above `run` (0 for a top-level run), counted up to `MAX_DELEGATION_DEPTH`. */
export async function delegationDepth(
  getRun: (runId: string) => Promise<RunView | undefined>,
  run: RunView,
): Promise<number> {
  let depth = 0;
  let parentId = run.parent_run_id;
  while (parentId && depth < MAX_DELEGATION_DEPTH) {
    depth += 1;
    parentId = (await getRun(parentId))?.parent_run_id ?? null;
  }
  return depth;
}
