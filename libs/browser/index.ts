export type { UploadPayload } from './act-target.js';
export {
  CHROMIUM_ARGS,
  type ChromiumLocation,
  type LaunchOptions,
  launchChromium,
  resolveChromium,
  systemChromiumPaths,
} from './chromium.js';
export { COOKIE_FLUSH_BOUND_MS, flushPageCookies } from './cookie-flush.js';
export { DIALOG_MESSAGE_LIMIT_CHARS } from './dialogs.js';
export { ContextDownloads, type DownloadEnd, type PageDownload } from './downloads.js';
export { BrowserToolError, CaptureTimedOutError, NavigationFailedError } from './errors.js';
export { evidenceKey } from './evidence-key.js';
export { NEVER_SENT_NET_ERRORS, neverReachedServer } from './net-errors.js';
export {
  CANDIDATE_LIMIT,
  TEXT_LIMIT_CHARS,
  type ToolOutcome,
  WINDOW_SIZE,
} from './observation.js';
export { type OperationLimits, within } from './operation.js';
export { normalizeOrigins, originAllowed } from './origin-guard.js';
export { type Box, type Capture, OUTLINE_RGB, PageCapture } from './page-capture.js';
export { PageEngine, type PageEngineOptions } from './page-engine.js';
export { compileFencePolicy } from './page-fence.js';
export { dispatchPersonInput } from './person-input.js';
export { MAX_POLLS, matchPredicate, POLL_INTERVAL_MS } from './predicate.js';
export { SETTLE_SNAPSHOT_LIMIT } from './request-tracker.js';
export {
  type CurrentTab,
  SCREENCAST_MAX_FPS,
  type ScreencastFrame,
  TabScreencast,
} from './screencast.js';
export { DOM_QUIET_MS, SETTLE_BOUND_MS } from './settle.js';
