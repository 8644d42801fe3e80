export { DataPlaneError, unclaimedKeyError } from './errors.js';
export { PageActivity } from './page-activity.js';
export { type LeaseArtifacts, LeaseScreenshots, type ScreenshotNotes } from './page-artifacts.js';
export type { PageFactory, PageResult, PageSession } from './pages.js';
export { PlaywrightPageFactory } from './playwright-pages.js';
export type {
  AcquireOutcome,
  BeginCloseOutcome,
  IdempotencyClaim,
  IdempotencyTicket,
  IdempotentAnswerRecord,
  IdempotentRenewal,
  IdempotentRenewOutcome,
  LeaseCaps,
  LeaseRecord,
  LeaseStore,
  ProfileSettings,
  SealedState,
  SequenceOutcome,
  StoredProfile,
} from './ports.js';
export { sealState, unsealState } from './seal.js';
export { LeaseService, type RenewalResult, type UnclaimedKey } from './service.js';
export {
  type CompiledLeaseServiceOptions,
  compileLeaseServiceOptions,
  DEFAULT_LEASE_CAPS,
  type LeaseServiceOptions,
} from './service-options.js';
export { WarmPool, type WarmPoolLimits, type WarmPoolOptions } from './warm-pool.js';
