export { type CancelListener, listenForCancels } from './cancel-listener.js';
export { type ChildrenDeps, type DelegationHooks, delegateToChild } from './children.js';
export { type ClaimOutcome, claimExecution } from './claim.js';
export { drainBoundMs } from './drain-bound.js';
export {
  type EscapedDeps,
  type EscapedOutcome,
  HAND_BACK_BASE_MS,
  handBackDelayMs,
  isRetryableFault,
  MAX_FAULT_HANDBACKS,
  newErrorId,
  settleEscapedError,
} from './escaped.js';
export { executeRun } from './execution.js';
export type { ExecutionDeps } from './execution-deps.js';
export { closeOwnLease, type ExecutionLeftovers, endExecution } from './execution-end.js';
export { jobResult } from './job-result.js';
export { executionsCounter, type RunJobDeps, runJobProcessor } from './run-job.js';
export { RunLost, refusedUnlessOk } from './run-lost.js';
export { startUpkeepTask, type UpkeepTaskDeps } from './upkeep-task.js';
