export { ARTIFACT_SWEEP_EVERY_MS, ArtifactSweep, type ArtifactSweepDeps } from './artifact-sweep.js';
export { type SweepErrorReporter, sweepErrorReporter } from './error-reporter.js';
export {
  FAILED_JOB_SETTLE_MS,
  type FailedJob,
  type FailedJobPage,
  FailedJobWalk,
  type FailedJobWalkOptions,
  RECLAIM_SCAN_JOBS,
} from './failed-job-walk.js';
export { SweepPass, type SweepPassDeps, type SweepStore } from './sweep-pass.js';
export { createSweeperMetrics, type SweeperMetrics } from './sweeper-metrics.js';
export { handOverOrphanedLeases, type UpkeepHandover, type UpkeepHandoverDeps } from './upkeep-handover.js';
