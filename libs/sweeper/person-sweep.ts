import { REQUEST_PERSON_TOOL, type RunView } from '../contracts/index.js';
import type { RunPageControl } from '../runtime/person-page-control.js';
import type { RunStore } from '../store/index.js';
import type { Metrics } from '../telemetry/index.js';

/** A parked run's `person` approval past its time, as the stale-approval sweep found it. */
export interface PersonDue {
  runId: string;
  kind: 'timeout' | 'handback';
  approvalId: string;
  holder: string;
}

export interface PersonSweepDeps {
  store: Pick<RunStore, 'getRun' | 'getApproval' | 'failRun' | 'handBack'>;
  /** The data plane's person control, to end a takeover whose time is up; absent, it ends there by itself. */
  pageControl?: RunPageControl;
  metrics?: Pick<Metrics, 'of'>;
  /** A run this sweep failed (`person_timeout`): its consequences go through the lifecycle. */
  onRunEnded(run: RunView): Promise<void>;
  /** A run this sweep resumed (a takeover handed back at its time limit): its next execution is enqueued. */
  onRunResumed(runId: string): Promise<void>;
}

/**
 * The sweeper's side of a person on the page: a request nobody took over by its expiry fails the
 * run `person_timeout`; a takeover past its time limit is handed back, and the run goes on as
 * after any hand-back. Each is one script on the run's keys, so a person who acts at that moment
 * either wins (the approval is no longer pending) or loses cleanly.
 */
export async function settlePersonDue(
  deps: PersonSweepDeps,
  due: PersonDue,
): Promise<'failed' | 'resumed' | 'none'> {
  const run = await deps.store.getRun(due.runId);
  if (run?.status !== 'parked') return 'none';
  const approval = await deps.store.getApproval(run.tenant, due.approvalId);
  if (approval?.status !== 'pending') return 'none';
  if (due.kind === 'timeout') {
    const failed = await deps.store.failRun(run.id, 'person_timeout', {
      expectedExecution: run.execution,
      message: 'the run asked for a person and nobody took its page over in time',
    });
    if (!failed.ok) return 'none';
    if (approval.tool === REQUEST_PERSON_TOOL) deps.metrics?.of('personRequests').inc({ outcome: 'timeout' });
    await deps.onRunEnded(failed.run);
    return 'failed';
  }
  const ended = await deps.pageControl?.end(run, due.holder).catch(() => undefined);
  const endedAtMs = ended?.endedAtMs ?? Date.now();
  const decision = await deps.store.handBack(run.tenant, approval.id, due.holder.replace(/^principal:/, ''), {
    holder: due.holder,
    account: { ended_at_ms: endedAtMs, inputs: ended?.inputs ?? null, end_url: ended?.url ?? null },
  });
  if (!decision.ok) return 'none';
  const sinceMs = approval.person?.since_ms;
  if (sinceMs !== null && sinceMs !== undefined)
    deps.metrics
      ?.of('personTakeoverDuration')
      .observe({ ended: 'time_limit' }, Math.max(0, endedAtMs - sinceMs) / 1000);
  await deps.onRunResumed(run.id);
  return 'resumed';
}
