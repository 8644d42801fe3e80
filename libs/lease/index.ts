export { DataPlaneError } from './errors.js';
export {
  type LeaseArtifacts,
  screenshotName,
  storeCapture,
} from './page-artifacts.js';
export type { PageFactory, PageResult, PageSession } from './pages.js';
export { PlaywrightPageFactory } from './playwright-pages.js';
export type {
  AcquireOutcome,
  BeginCloseOutcome,
  IdempotencyClaim,
  IdempotentAnswerRecord,
  IdempotentRenewal,
  IdempotentRenewOutcome,
  LeaseCaps,
  LeaseRecord,
  LeaseStore,
  ProfileSettings,
  RenewOutcome,
  SequenceOutcome,
  StoredProfile,
} from './ports.js';
export { sealState, unsealState } from './seal.js';
export {
  DEFAULT_LEASE_CAPS,
  LeaseService,
  type LeaseServiceOptions,
  type RenewalResult,
} from './service.js';
