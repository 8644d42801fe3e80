export {
  agentVersionOf,
  type DeleteSessionOutcome,
  type NewSession,
  type PutAgentOutcome,
} from './agents.js';
export type { ApiKeyRefusal, IssuedApiKey, NewApiKey } from './api-keys.js';
export type { ApprovalDecision, ApprovalRequest, GrantUse, HandBack } from './approvals.js';
export { FollowUpIndex, type OwedFollowUp } from './follow-ups.js';
export { AgentVersionCache, SessionCache } from './immutable-caches.js';
export { LeaderLock } from './leader-lock.js';
export { type DeleteProfileOutcome, type ProfileChange, RedisLeaseStore } from './lease-store.js';
export type { InvocationRecord, LedgerOutcome } from './ledger.js';
export {
  type McpSessionSlot,
  type McpSessionSlotLimits,
  McpSessionSlots,
  type McpSlotVerdict,
  mcpSessionSlotKeys,
} from './mcp-session-slots.js';
export { personHolder, type TakeOver, type TakeOverRequest } from './person-control.js';
export {
  isSignInId,
  newSignInId,
  type ProfileSignInRecord,
  type ProfileSignInStatus,
  ProfileSignIns,
  SIGN_IN_ID_PREFIX,
  SIGN_IN_MAX_MS,
} from './profile-sign-ins.js';
export { type ProfileLine, ProfileTurns, type TurnVerdict } from './profile-turns.js';
export { isEventId } from './run-events.js';
export { RunFileNotes, readRunFiles } from './run-files.js';
export { RunKeys } from './run-keys.js';
export {
  type CompiledRunStoreOptions,
  compileRunStoreOptions,
  formatRunCursor,
  idempotentRunId,
  parseRunCursor,
  RUN_EVENTS_CAP,
  type RunEnd,
  RunStore,
  type RunStoreOptions,
  SEARCH_WINDOW_RUNS,
  type StepPage,
  type StepRecord,
  type StepWriteOptions,
  type StepWriteOutcome,
  type SubmitOutcome,
  type SubmitRun,
  type TenantRunCursor,
  type TenantRunPage,
  type TenantRunQuery,
} from './run-store.js';
export type { RunRefusal, RunRefusalCode, RunTransition } from './run-transition.js';
export {
  type ScheduleMaker,
  type SchedulePauseReason,
  type ScheduleRecord,
  ScheduleStore,
} from './schedules.js';
export { RunScreenshotNotes } from './screenshot-states.js';
export { type ScriptCommands, withScripts } from './scripts.js';
export {
  csrfTokenMatches,
  UI_SESSION_TTL_MS,
  UI_SESSIONS_PER_KEY,
  type UiSession,
  type UiSessionOptions,
  UiSessions,
} from './ui-sessions.js';
export { type IndexedLease, LeaseUpkeepIndex, RunWorkerRoster } from './upkeep-index.js';
export { UPLOAD_HOLD_GRACE_MS, UploadStore } from './uploads.js';
export { type BrowserWorkerRecord, BrowserWorkerRegistry } from './worker-registry.js';
