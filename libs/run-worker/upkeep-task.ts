import type { Config } from '../config/index.js';
import { compileLeaseUpkeepOptions, type LeaseUpkeepDeps, runLeaseUpkeep } from '../runtime/index.js';
import { IntervalTask } from '../shutdown/index.js';
import type { Logger, Metrics } from '../telemetry/index.js';

/** What the run worker's lease upkeep reads: the leases, the runs and the browser workers. */
export type UpkeepTaskDeps = Pick<LeaseUpkeepDeps, 'leases' | 'runs' | 'workers'> & {
  config: Config;
  metrics: Metrics;
  logger: Logger;
  /** The upkeep's windows and clock (ADR-0127 d5 figures by default); tests shrink them. */
  timings?: Pick<LeaseUpkeepDeps, 'windowMs' | 'stepMs' | 'lifetimeMs' | 'clock'> | undefined;
};

/**
 * ADR-0127 d6: the lease upkeep, once a minute beside the claim loop: leases whose runs still need
 * them are renewed when due, leases of runs done with the page are sealed and closed. Started; its
 * owner closes it.
 */
export function startUpkeepTask(deps: UpkeepTaskDeps): IntervalTask {
  const { config, metrics, logger: log } = deps;
  const passes = metrics.of('upkeepPasses');
  const passSeconds = metrics.of('upkeepPassSeconds');
  const leasesSeen = metrics.of('upkeepLeases');
  // Checked once, at start-up: a bad window fails the worker's start, not each pass.
  const options = compileLeaseUpkeepOptions(deps.timings);
  return new IntervalTask(
    'lease-upkeep',
    config.runWorker.upkeepIntervalMs,
    async () => {
      const token = config.secrets.dataPlaneToken;
      if (!token) return;
      const endTimer = passSeconds.startTimer();
      const pass = await runLeaseUpkeep({
        leases: deps.leases,
        runs: deps.runs,
        workers: deps.workers,
        dataPlaneToken: token,
        ...options,
        onError: (lease, error) =>
          log.warn(
            { lease_id: lease.id, run_id: lease.scope.run_id, err: error },
            'lease upkeep: renew or close failed; the next pass tries again',
          ),
      });
      endTimer();
      passes.inc();
      leasesSeen.inc({ action: 'renewed' }, pass.renewed.length);
      leasesSeen.inc({ action: 'closed' }, pass.closed.length);
      leasesSeen.inc({ action: 'failed' }, pass.failed.length);
    },
    log,
  ).start();
}
