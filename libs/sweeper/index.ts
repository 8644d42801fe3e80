export { ARTIFACT_SWEEP_EVERY_MS, ArtifactSweep, type ArtifactSweepDeps } from './artifact-sweep.js';
export {
  DEADLINE_SWEEP_BATCH,
  type DeadlineSweepDeps,
  type DeadlineSweepOutcome,
  type DeadlineSweepStore,
  STALE_APPROVAL_SWEEP_BATCH,
  STALE_APPROVAL_SWEEP_START,
  type StaleApprovalCursor,
  type StaleApprovalSweepDeps,
  type StaleApprovalSweepOutcome,
  sweepDeadlines,
  sweepStaleApprovals,
} from './deadline-sweep.js';
export { type SweepErrorReporter, sweepErrorReporter } from './error-reporter.js';
export {
  FAILED_JOB_SETTLE_MS,
  type FailedJob,
  type FailedJobPage,
  FailedJobWalk,
  type FailedJobWalkOptions,
  RECLAIM_SCAN_JOBS,
} from './failed-job-walk.js';
export {
  ORPHAN_GRACE_MS,
  ORPHAN_SWEEP_BATCH,
  type OrphanSweepDeps,
  sweepQueuedWithoutJob,
} from './orphan-sweep.js';
export { type ReclaimDeps, reclaimStalledRuns, STALLED_PAST_LIMIT } from './reclaim.js';
export { SweepPass, type SweepPassDeps, type SweepStore } from './sweep-pass.js';
export { createSweeperMetrics, type SweeperMetrics } from './sweeper-metrics.js';
export { adoptUnindexedLeases, type UpkeepFill, type UpkeepFillDeps } from './upkeep-fill.js';
export { handOverOrphanedLeases, type UpkeepHandover, type UpkeepHandoverDeps } from './upkeep-handover.js';
