import { type Job, UnrecoverableError, type Worker } from 'bullmq';
import type { Config } from '../../libs/config/index.js';
import { IntervalTask } from '../../libs/lifecycle/index.js';
import { Counter, type Logger, type Metrics, type ReadinessCheck } from '../../libs/telemetry/index.js';
import { closeWorker, createQueueWorker, RUNS_QUEUE, type RunJob, runJobSchema } from '../../queues/index.js';

export interface RunWorkerOptions {
  config: Config;
  logger: Logger;
  metrics: Metrics;
  redisUrl: string;
}

export interface RunWorkerHandle {
  worker: Worker<RunJob, void, string>;
  /** ADR-0127 d6: the lease upkeep, beside the claim loop. */
  upkeep: IntervalTask;
  readiness(): ReadinessCheck[];
  close(): Promise<void>;
}

/**
 * A run worker: claims `runs` jobs and keeps a lease upkeep timer beside its claim loop. The run
 * loop itself (claim → model ⇄ tools → park or end) is built by the runs issue; until then an
 * execution is checked, counted and completed.
 */
export async function startRunWorker(options: RunWorkerOptions): Promise<RunWorkerHandle> {
  const { config, logger, metrics } = options;
  const log = logger.child({ component: 'run-worker' });
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

  const execute = async (job: Job<RunJob, void, string>): Promise<void> => {
    const parsed = runJobSchema.safeParse(job.data);
    if (!parsed.success) {
      executions.inc({ outcome: 'invalid' });
      throw new UnrecoverableError(`job ${job.id} carries no valid run execution`);
    }
    log.info({ run_id: parsed.data.runId, execution: parsed.data.execution, job_id: job.id }, 'claimed');
    executions.inc({ outcome: 'completed' });
  };

  const worker = await createQueueWorker<RunJob, void>(RUNS_QUEUE, execute, {
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
      upkeepPasses.inc();
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
        const outcome = await closeWorker(worker, config.shutdownTimeoutMs * 0.8);
        log.info({ outcome }, 'claim loop stopped');
        await upkeep.close();
      })();
      return closing;
    },
  };
}
