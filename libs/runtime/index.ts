export { microUsdToUsd, usdToMicroUsd } from '../contracts/index.js';
export {
  type BreakerCall,
  type BreakerInvocation,
  type BreakerVerdict,
  IDENTICAL_CALL_THRESHOLD,
  LoopBreaker,
  type LoopBreakerOptions,
  type LoopBreakerSnapshot,
  loopBreakerSnapshotSchema,
  MAX_EVIDENCE_RESTARTS,
} from './breaker.js';
export {
  BOUND_TOOL_DEFINITIONS,
  BROWSER_TOOL_DEFINITIONS,
  BrowserToolExecutor,
  REQUEST_PERSON_DEFINITION,
} from './browser-executor.js';
export {
  type CostLimits,
  type CostRecordVerdict,
  callCostMicroUsd,
  checkCostAfterCall,
  checkCostBeforeCall,
  costToolRequestRefused,
  isZeroPriced,
  type ModelPrice,
  type ModelPriceConfig,
  modelPrice,
  WORST_CASE_OUTPUT_TOKENS,
  worstCaseCallMicroUsd,
} from './cost.js';
export {
  childLimits,
  childOutcome,
  DELEGATE_TOOL_DEFINITION,
  DELEGATE_TOOL_NAME,
  type DelegateArgs,
  type DelegateStep,
  delegateArgsSchema,
  delegationDepth,
  MAX_DELEGATION_DEPTH,
  type ParentResumeDeps,
  resumeParentOf,
} from './delegation.js';
export { type FleetLifecycleOptions, fleetLifecycle } from './fleet-lifecycle.js';
export { type LeaseReleaseDeps, releaseRunLease } from './lease-release.js';
export {
  LEASE_UPKEEP_DEFAULTS,
  type LeaseUpkeepDeps,
  renewalTarget,
  runLeaseUpkeep,
  type UpkeepLease,
  type UpkeepPass,
} from './lease-upkeep.js';
export {
  type CompiledLeaseUpkeepOptions,
  compileLeaseUpkeepOptions,
  type LeaseUpkeepOptions,
} from './lease-upkeep-options.js';
export {
  checkModelCall,
  fitBatch,
  type ModelCallVerdict,
  type RunLimits,
  type RunUsage,
  remainingToolCalls,
  toolRequestRefused,
} from './limits.js';
export {
  type ExecutionEnd,
  ExecutionInterrupted,
  type Invocation,
  type InvocationState,
  type RunLoopOptions,
  type RunPort,
  runExecution,
  type ToolCallContext,
  type ToolExecutor,
  type ToolPolicy,
  type ToolRun,
} from './loop.js';
export {
  type Model,
  ModelBudgetExceeded,
  type ModelCallLimits,
  ModelCancelled,
  ModelError,
  type ModelRequest,
  type ModelResponse,
  type ModelUsage,
  type ToolCall,
  type ToolDefinition,
  type ToolOutcome,
  type TranscriptEntry,
} from './model.js';
export {
  planRoster,
  RosterError,
  type RosterInput,
  type RosterPlan,
  resolveDeferredCall,
  searchDeferredTools,
  TOOL_CALL_DEFINITION,
  TOOL_CALL_NAME,
  TOOL_SEARCH_DEFINITION,
  TOOL_SEARCH_NAME,
} from './roster.js';
export {
  FOLLOW_UP_GRACE_MS,
  type FollowUpsPort,
  type LifecycleStore,
  RunLifecycle,
  type RunLifecycleDeps,
  type TransitionCause,
  type TurnOutcome,
  type TurnsPort,
} from './run-lifecycle.js';
export {
  BROWSER_TASK_LIMITS_KEY,
  BROWSER_TOOL_NAMES_REQUIRED,
  browserTaskLimits,
  defaultAgentDefinition,
  runDefaultLimits,
  selectRunLimits,
} from './run-limits.js';
export { type ArgumentSealer, argumentSealer, SECRET_MARKER } from './secret-args.js';
