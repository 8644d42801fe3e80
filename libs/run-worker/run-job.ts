import { type Job, UnrecoverableError } from 'bullmq';
import {
  handBack,
  handBackLater,
  type JobLocks,
  type RunJob,
  type RunJobResult,
  runJobSchema,
  SHUTDOWN_REASON,
} from '../../queues/index.js';
import { type RunView, runHasEnded } from '../contracts/index.js';
import { type ExecutionEnd, ExecutionInterrupted } from '../runtime/index.js';
import { type Counter, type Histogram, METRICS, metricOf, type Registry } from '../telemetry/index.js';
import type { RedisLinkView } from '../telemetry/redis-link.js';
import { claimExecution } from './claim.js';
import { settleEscapedError } from './escaped.js';
import { executeRunToEnd } from './execution.js';
import type { ExecutionDeps } from './execution-deps.js';
import { jobResult } from './job-result.js';
import { lockAfterOutage, lockGuard, stoppedByOutage } from './lock-guard.js';
import { RunLost } from './run-lost.js';

export interface RunJobDeps extends ExecutionDeps {
  /** Runs whose cancel was heard; an execution's entry is dropped when it ends. */
  cancelsHeard: Set<string>;
  /** `leasehold_run_executions_total{outcome}`. */
  executions: Pick<Counter<'outcome'>, 'inc'>;
  /** `leasehold_run_queue_wait_seconds`, observed at each fresh claim. */
  queueWait?: Pick<Histogram, 'observe'>;
  /** The job locks as BullMQ's renewals report them; absent, calls are not held back on them. */
  jobLocks?: JobLocks;
  /** Whether this worker's own Redis connection answers (the lock-risk gate reads it). */
  redisLink?: RedisLinkView;
}

/** The `runs` job processor: claim → execute → the job's result, or an escaped error settled. */
export function runJobProcessor(deps: RunJobDeps) {
  const { store, lifecycle, logger: log, cancelsHeard, executions } = deps;
  return async (
    job: Job<RunJob, RunJobResult, string>,
    token: string | undefined,
    signal?: AbortSignal,
  ): Promise<RunJobResult> => {
    const parsed = runJobSchema.safeParse(job.data);
    if (!parsed.success) {
      executions.inc({ outcome: 'invalid' });
      throw new UnrecoverableError(`job ${job.id} carries no valid run execution`);
    }
    const { runId, execution } = parsed.data;
    const claim = await claimExecution(deps, job, parsed.data, token);
    if (!claim.ok) {
      executions.inc({ outcome: 'stale' });
      log.info({ run_id: runId, execution, refusal: claim.code }, 'job not claimed');
      // A worker that died between a child's end and its consequences (its parent's resume, its
      // lease's release) left them undone; the child's job comes back here through stall detection.
      if (claim.status && runHasEnded(claim.status)) await lifecycle.followUpById(runId);
      return claim.result;
    }
    const { ownerToken } = claim;
    const runLog = log.child({ run_id: runId, execution });
    runLog.info({ detail: claim.detail }, 'claimed');
    const controller = new AbortController();
    signal?.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
    let end: ExecutionEnd;
    let afterEnd: RunView | undefined;
    try {
      // Noted before any transition of this execution, so its follow-up survives a crash.
      await lifecycle.owe(claim.run);
      const turn = await lifecycle.takeTurn(claim.run, ownerToken);
      if (turn !== 'go') {
        executions.inc({ outcome: turn === 'waiting' ? 'waiting_profile' : 'lost' });
        runLog.info(
          { turn },
          turn === 'waiting' ? 'waits its turn for its profile' : 'run lost before its turn',
        );
        return turn === 'waiting' ? { status: 'queued', code: null } : { status: 'lost', code: 'not_owner' };
      }
      const guard = deps.jobLocks && lockGuard(deps.jobLocks, job, token, controller.signal, deps.redisLink);
      ({ end, after: afterEnd } = await executeRunToEnd(
        { ...deps, logger: runLog, ...(guard ? { lockGuard: guard } : {}) },
        claim.run,
        ownerToken,
        controller.signal,
        { transcriptEmpty: claim.transcriptEmpty },
      ));
    } catch (error) {
      cancelsHeard.delete(runId);
      if (error instanceof RunLost) {
        executions.inc({ outcome: 'lost' });
        runLog.warn({ err: error }, 'run lost to another writer');
        return { status: 'lost', code: 'not_owner' };
      }
      // A Redis that stopped answering: once it answers, the run goes back to the queue if its job
      // lock is still this worker's; otherwise the next owner has it, and nothing is written here.
      const lock =
        deps.jobLocks && stoppedByOutage(error)
          ? await lockAfterOutage(deps.jobLocks, job, token, controller.signal, deps.redisLink)
          : undefined;
      if (lock === 'lost') {
        executions.inc({ outcome: 'lost' });
        runLog.info('run dropped: its job lock lapsed while Redis did not answer');
        return { status: 'lost', code: 'not_owner' };
      }
      if (lock === 'held') {
        const released = await store
          .releaseRun(runId, ownerToken, { detail: { reason: 'redis' } })
          .catch(() => ({ ok: false }));
        runLog.info({ released: released.ok }, 'execution handed back after Redis answered again');
        executions.inc({ outcome: 'handed_back' });
        await handBack(job, token);
      }
      const stopped =
        (signal?.aborted && signal.reason === SHUTDOWN_REASON) ||
        (deps.stopping?.aborted && error instanceof ExecutionInterrupted);
      if (stopped) {
        // Released by its owner in the same step as the job goes back to waiting, so
        // the next worker's claim takes the run over at once (its lease is kept for reattach). A
        // stop hands the run back at its next call boundary; a call still unanswered at the stop's
        // bound goes with it, to be learned from its lease by the next owner.
        const released = await store.releaseRun(runId, ownerToken, { detail: { reason: 'shutdown' } });
        runLog.info({ released: released.ok }, 'execution handed back at shutdown');
        executions.inc({ outcome: 'handed_back' });
        await handBack(job, token);
      }
      const settled = await settleEscapedError(
        { store, lifecycle, logger: runLog, handBackBaseMs: deps.config.runWorker.handBackBaseMs },
        claim.run,
        ownerToken,
        error,
      );
      executions.inc({ outcome: `fault_${settled.kind}` });
      if (settled.kind === 'handed_back') await handBackLater(job, token, settled.delayMs);
      // The execution's last line names its end and the run's code, as the run has them.
      const status =
        settled.kind === 'failed' ? 'failed' : settled.kind === 'handed_back' ? 'queued' : 'lost';
      const code = settled.kind === 'failed' ? settled.code : null;
      // The end was counted by the lifecycle; the error id stays in its one log line and the run's message.
      runLog.info({ end: `fault_${settled.kind}`, status, code }, endedLine(status, code));
      if (settled.kind === 'failed') throw new UnrecoverableError(`run failed: ${settled.code}`);
      return { status: 'lost', code: null };
    }
    cancelsHeard.delete(runId);
    executions.inc({ outcome: end.kind });
    // An end is final: the run as this execution ended it is the run now (not read
    // again). Anything short of an end (a park, a wait) may have moved since, so it is read.
    const after = afterEnd && runHasEnded(afterEnd.status) ? afterEnd : await store.getRun(runId);
    const status = after?.status ?? end.kind;
    const code = after?.error?.code ?? null;
    // The execution's last line names its end, and the run's status and error code as
    // the store has them now (a park cancelled meanwhile, a failure's own code).
    runLog.info({ end: end.kind, status, code }, endedLine(status, code));
    return jobResult(end, after);
  };
}

/** `execution ended: failed provider_unavailable`, `execution ended: succeeded`. */
function endedLine(status: string, code: string | null): string {
  return code ? `execution ended: ${status} ${code}` : `execution ended: ${status}`;
}

/** `leasehold_run_executions_total{outcome}`: run executions claimed by this process. */
export function executionsCounter(registry: Registry): Counter<'outcome'> {
  return metricOf(METRICS.runExecutions, registry);
}
