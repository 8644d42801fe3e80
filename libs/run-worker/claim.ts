import type { Job } from 'bullmq';
import type { RunJob, RunJobResult } from '../../queues/index.js';
import type { RunStatus, RunView } from '../contracts/index.js';
import type { RunStore } from '../store/index.js';
import type { Histogram } from '../telemetry/index.js';

/** What a claim of a `runs` job decided: the run is this owner's now, or the job does nothing. */
export type ClaimOutcome =
  | {
      ok: true;
      run: RunView;
      ownerToken: string;
      detail: string;
      /** The claim found the run's current transcript empty (nothing to read). */
      transcriptEmpty: boolean;
    }
  | { ok: false; code: string; status: RunStatus | undefined; result: RunJobResult };

/** What a claim works with: the store, and where the run's wait in the queue is observed. */
export interface ClaimDeps {
  store: Pick<RunStore, 'claimRun'>;
  /** `leasehold_run_queue_wait_seconds`: from the run becoming queued to this claim, in seconds. */
  queueWait?: Pick<Histogram, 'observe'> | undefined;
  /** This run worker in the upkeep's index: a claimed run's lease moves to it (ADR-0127 d6). */
  upkeep?: { workerId: string } | undefined;
}

/**
 * DESIGN §4.2: a worker claims the job's run execution, `queued → running` in one script that
 * checks the expected status, under an owner token naming this claim of this job. A job handed on
 * after a stall takes the run over. A refusal (a stale job, a run that moved on) leaves the job
 * with nothing to do; a check made right after the claim belongs here, beside it.
 */
export async function claimExecution(
  deps: ClaimDeps,
  job: Job<RunJob, RunJobResult, string>,
  data: RunJob,
  token: string | undefined,
): Promise<ClaimOutcome> {
  const { store } = deps;
  const ownerToken = `${job.id}:${token ?? 'none'}`;
  const claim = await store.claimRun(data.runId, data.execution, ownerToken, {
    takeOver: (job.stalledCounter ?? 0) > 0,
    ...(deps.upkeep ? { workerId: deps.upkeep.workerId } : {}),
  });
  if (!claim.ok)
    return {
      ok: false,
      code: claim.code,
      status: claim.status,
      result: { status: 'not_claimed', code: claim.code },
    };
  // A fresh claim ends the run's wait in the queue (a take-over ends none: the run was running).
  if (claim.queuedAtMs !== undefined)
    deps.queueWait?.observe(Math.max(0, claim.run.updated_at_ms - claim.queuedAtMs) / 1000);
  return {
    ok: true,
    run: claim.run,
    ownerToken,
    detail: claim.detail,
    transcriptEmpty: claim.transcriptEntries === 0,
  };
}
