export { type DecidableApproval, renderApprovalsPage } from './approvals-page.js';
export {
  escapeHtml,
  formatDuration,
  formatTime,
  Html,
  html,
  PAGE_CSP,
  PAGE_HEADERS,
  PAGE_SCRIPT_PATH,
  PAGE_STYLE_PATH,
  type PageViewer,
  pageLayout,
  raw,
} from './html.js';
export { LIVE_VIEW_SCRIPT, liveViewFragment } from './live-view.js';
export { PAGE_SCRIPT, PAGE_STYLE } from './page-assets.js';
export { type ProfileSignInView, renderProfileSignInPage, signInBeatMs } from './profile-sign-in-page.js';
export { artifactUrl, renderRunPage } from './run-page.js';
export {
  RUN_LIST_FILTERS,
  type RunListFilters,
  renderRunsPage,
  renderSignInPage,
  runListParams,
} from './runs-page.js';
export {
  CSRF_HEADER,
  changesState,
  SESSION_COOKIE,
  type SessionCookieOptions,
  sessionCookieOptions,
  sessionIdOf,
} from './session-cookie.js';
