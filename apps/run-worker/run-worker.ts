import { type Job, UnrecoverableError, type Worker } from 'bullmq';
import { browserToolsLine, browserToolsState, type Config } from '../../libs/config/index.js';
import { runHasEnded } from '../../libs/contracts/index.js';
import { IntervalTask } from '../../libs/lifecycle/index.js';
import {
  type ExecutionEnd,
  type LeaseReleaseDeps,
  type LeaseUpkeepDeps,
  runLeaseUpkeep,
} from '../../libs/runtime/index.js';
import { BrowserWorkerRegistry, RedisLeaseStore, RunStore } from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { Counter, type Logger, type Metrics, type ReadinessCheck } from '../../libs/telemetry/index.js';
import { isRedisUnreachable, redisLink } from '../../libs/telemetry/redis-link.js';
import {
  closeRedis,
  closeWorker,
  connectRedis,
  createQueueWorker,
  createRunsQueue,
  handBack,
  handBackLater,
  RUNS_QUEUE,
  type RunJob,
  type RunJobResult,
  runJobSchema,
  SHUTDOWN_REASON,
} from '../../queues/index.js';
import { resumeParent } from './children.js';
import { settleEscapedError } from './escaped.js';
import { type ExecutionDeps, executeRun, RunLost } from './execution.js';

export interface RunWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
  /** The upkeep's windows and clock (ADR-0127 d5 figures by default); tests shrink them. */
  upkeep?: Pick<LeaseUpkeepDeps, 'windowMs' | 'stepMs' | 'lifetimeMs' | 'clock'>;
  /** Test-only: the executions' fault hook (issue 12; see `ExecutionDeps.faults`). */
  faults?: ExecutionDeps['faults'];
}

export interface RunWorkerHandle {
  worker: Worker<RunJob, RunJobResult, string>;
  /** ADR-0127 d6: the lease upkeep, beside the claim loop. */
  upkeep: IntervalTask;
  readiness(): ReadinessCheck[];
  close(): Promise<void>;
}

/**
 * A run worker: claims `runs` jobs (claim → model ⇄ tools → park, wait or end) and runs the lease
 * upkeep once a minute beside its claim loop (ADR-0127 d6): leases whose runs still need them are
 * renewed when due, leases of runs done with the page are sealed and closed.
 */
export async function startRunWorker(options: RunWorkerOptions): Promise<RunWorkerHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'run-worker' });
  // Issue 11.13: a production run worker without a token would run every browser task without a
  // browser; it refuses to start instead, unless LEASEHOLD_BROWSER_TOOLS=off says so on purpose.
  const browserTools = browserToolsState(config);
  log[browserTools === 'enabled' ? 'info' : 'warn'](browserToolsLine(config));
  const executions = new Counter({
    name: 'leasehold_run_executions_total',
    help: 'Run executions claimed by this process, by outcome.',
    labelNames: ['outcome'],
    registers: [metrics.registry],
  });
  const upkeepPasses = new Counter({
    name: 'leasehold_lease_upkeep_passes_total',
    help: 'Lease upkeep passes run by this process.',
    registers: [metrics.registry],
  });

  const upkeepLeases = new Counter({
    name: 'leasehold_lease_upkeep_leases_total',
    help: 'Leases the upkeep renewed, closed (their run was done with the page) or failed to reach.',
    labelNames: ['action'],
    registers: [metrics.registry],
  });

  const redis = await connectRedis(options.redisUrl, 'worker', 'run-worker-store');
  const store = new RunStore(redis, config.redis.keyPrefix);
  // DESIGN §4.7: a cancel of a running run is told through pub/sub, wherever the run runs; the
  // loop also reads the store's flag before every call, so a missed message delays nothing long.
  const cancelsHeard = new Set<string>();
  const subscriber = redis.duplicate();
  // Issue 12: an outage is logged once by the process's link watch, which follows this one too.
  subscriber.on('error', (error) => {
    if (!isRedisUnreachable(error)) log.warn({ err: error }, 'cancel subscription error');
  });
  redisLink.watch(subscriber, 'run-worker-cancels');
  subscriber.on('message', (_channel, runId: string) => cancelsHeard.add(runId));
  await subscriber.subscribe(store.cancelChannel);
  const queue = createRunsQueue(redis, config.redis.queuePrefix);
  const leases = new RedisLeaseStore(redis, config.redis.keyPrefix);
  const deps: ExecutionDeps = {
    config,
    store,
    queue,
    cancelsHeard,
    transcripts: new RunTranscripts(redis, config.redis.keyPrefix),
    registry: new BrowserWorkerRegistry(redis, config.redis.keyPrefix),
    profiles: leases,
    logger: log,
    ...(options.faults ? { faults: options.faults } : {}),
  };

  const release: LeaseReleaseDeps | undefined = config.secrets.dataPlaneToken
    ? { leases, workers: deps.registry, dataPlaneToken: config.secrets.dataPlaneToken }
    : undefined;

  const execute = async (
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
    // The owner token: this claim of this job. A job handed on after a stall takes the run over.
    const ownerToken = `${job.id}:${token ?? 'none'}`;
    const claim = await deps.store.claimRun(runId, execution, ownerToken, {
      takeOver: (job.stalledCounter ?? 0) > 0,
    });
    if (!claim.ok) {
      executions.inc({ outcome: 'stale' });
      log.info({ run_id: runId, execution, refusal: claim.code }, 'job not claimed');
      // A worker that died between a child's end and its parent's resume left the parent
      // waiting; the child's job comes back here through stall detection.
      if (claim.status && runHasEnded(claim.status)) {
        const ended = await deps.store.getRun(runId);
        if (ended) await resumeParent(deps, ended);
      }
      return { status: 'not_claimed', code: claim.code };
    }
    const runLog = log.child({ run_id: runId, execution });
    runLog.info({ detail: claim.detail }, 'claimed');
    const controller = new AbortController();
    signal?.addEventListener('abort', () => controller.abort(signal.reason), { once: true });
    let end: ExecutionEnd;
    try {
      end = await executeRun({ ...deps, logger: runLog }, claim.run, ownerToken, controller.signal);
    } catch (error) {
      cancelsHeard.delete(runId);
      if (error instanceof RunLost) {
        executions.inc({ outcome: 'lost' });
        runLog.warn({ err: error }, 'run lost to another writer');
        return { status: 'lost', code: 'not_owner' };
      }
      if (signal?.aborted && signal.reason === SHUTDOWN_REASON) {
        // Issue 12: released by its owner in the same step as the job goes back to waiting, so
        // the next worker's claim takes the run over at once (its lease is kept for reattach).
        const released = await deps.store.releaseRun(runId, ownerToken, { detail: { reason: 'shutdown' } });
        runLog.info({ released: released.ok }, 'execution handed back at shutdown');
        executions.inc({ outcome: 'handed_back' });
        await handBack(job, token);
      }
      const settled = await settleEscapedError(
        { store, release, logger: runLog },
        claim.run,
        ownerToken,
        error,
      );
      executions.inc({ outcome: `fault_${settled.kind}` });
      if (settled.kind === 'handed_back') await handBackLater(job, token, settled.delayMs);
      if (settled.kind === 'failed') {
        options.metrics.runEnded('failed', settled.code);
        // The error id stays in its one log line and the run's message (issue 12).
        throw new UnrecoverableError(`run failed: ${settled.code}`);
      }
      return { status: 'lost', code: null };
    }
    cancelsHeard.delete(runId);
    executions.inc({ outcome: end.kind });
    runLog.info({ end: end.kind }, 'execution ended');
    return jobResult(end, store, runId, options.metrics);
  };

  const worker = await createQueueWorker<RunJob, RunJobResult>(RUNS_QUEUE, execute, {
    redisUrl: options.redisUrl,
    prefix: config.redis.queuePrefix,
    concurrency: config.runWorker.concurrency,
    lockDurationMs: config.runWorker.lockDurationMs,
    stalledIntervalMs: config.runWorker.stalledIntervalMs,
    maxStalledCount: config.runWorker.maxStalledCount,
    logger: log,
  });

  const upkeep = new IntervalTask(
    'lease-upkeep',
    config.runWorker.upkeepIntervalMs,
    async () => {
      const token = config.secrets.dataPlaneToken;
      if (!token) return;
      const pass = await runLeaseUpkeep({
        leases,
        runs: store,
        workers: deps.registry,
        dataPlaneToken: token,
        ...options.upkeep,
        onError: (lease, error) =>
          log.warn(
            { lease_id: lease.id, run_id: lease.scope.run_id, err: error },
            'lease upkeep: renew or close failed; the next pass tries again',
          ),
      });
      upkeepPasses.inc();
      upkeepLeases.inc({ action: 'renewed' }, pass.renewed.length);
      upkeepLeases.inc({ action: 'closed' }, pass.closed.length);
      upkeepLeases.inc({ action: 'failed' }, pass.failed.length);
    },
    log,
  ).start();

  let closing: Promise<void> | undefined;
  return {
    worker,
    upkeep,
    readiness: () => [{ name: 'run_worker', check: async () => worker.isRunning() && !worker.closing }],
    close() {
      closing ??= (async () => {
        // Stop claiming and finish (or hand back) what is in flight, then stop the upkeep: leases
        // of runs still in flight are kept until their executions end.
        const outcome = await closeWorker(worker, drainBoundMs(config.shutdownTimeoutMs));
        log.info({ outcome }, 'claim loop stopped');
        await upkeep.close();
        subscriber.disconnect();
        await queue.close();
        await closeRedis(redis);
      })();
      return closing;
    },
  };
}

/**
 * What a stop hands back, and then closes, after the drain: `closeWorker`'s hand-back grace (1 s)
 * and the closes of the upkeep and connections behind it.
 */
const HAND_BACK_BUDGET_MS = 1_500;

/**
 * Issue 12, a stop hands runs on: the drain lasts 80% of the shutdown bound, but never so long
 * that the hand-back after it would meet the forced exit (a run left owned by a departed worker).
 */
export function drainBoundMs(shutdownTimeoutMs: number): number {
  return Math.max(0, Math.min(shutdownTimeoutMs * 0.8, shutdownTimeoutMs - HAND_BACK_BUDGET_MS));
}

/**
 * Issue 12, the queue tells the truth: an execution's job returns the run's status and error
 * code, as the store has them now; a run this execution ended is counted once in
 * `leasehold_runs_ended_total`, and a failed run's job fails (unrecoverable: BullMQ never retries
 * it) after its end is recorded, so Bull Board lists it under Failed with its code.
 */
async function jobResult(
  end: ExecutionEnd,
  store: RunStore,
  runId: string,
  metrics: Metrics,
): Promise<RunJobResult> {
  const run = await store.getRun(runId);
  const status = run?.status ?? end.kind;
  const code = run?.error?.code ?? null;
  const endedHere = end.kind === 'succeeded' || end.kind === 'failed' || end.kind === 'cancelled';
  if (endedHere) metrics.runEnded(status, code);
  if (endedHere && status === 'failed')
    throw new UnrecoverableError(`run failed: ${code ?? 'unknown'}: ${run?.error?.message ?? ''}`);
  return { status, code };
}
