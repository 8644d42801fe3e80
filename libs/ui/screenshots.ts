import type { ScreenshotFailure, ScreenshotStatus } from '../contracts/index.js';
import { type Html, html } from './html.js';

/** Where the API serves one of a run's artifacts (behind the tenant check, like every /v1 route). */
export function artifactUrl(runId: string, name: string): string {
  return `/v1/runs/${encodeURIComponent(runId)}/artifacts/${encodeURIComponent(name)}`;
}

/** Why a screenshot is missing, as the person reading the run page needs it. */
const MISSING_BECAUSE: Record<ScreenshotFailure, string> = {
  capture_timeout: 'the page could not be captured in time (tried twice)',
  capture_error: 'the page could not be captured (tried twice)',
  dialog_open: 'a dialog held the page',
  page_closed: 'the page was closed first',
  store_error: 'the artifact store refused it',
  not_taken: 'the browser worker could not take it',
};

/**
 * A screenshot as its status allows (DESIGN §12: taken after the call answered): the image once
 * stored, "pending" while it is taken (`shot-pending`: the page script refreshes until it is
 * not), or why it is missing.
 */
export function screenshotOf(
  runId: string,
  name: string,
  status: ScreenshotStatus | null,
  image: (src: string) => Html,
): Html {
  if (status?.state === 'pending')
    return html`<p class="shot-pending" data-shot="${name}">Screenshot pending…</p>`;
  if (status?.state === 'failed')
    return html`<p class="shot-failed" data-shot="${name}">No screenshot: ${MISSING_BECAUSE[status.reason ?? 'capture_error']}.</p>`;
  return image(artifactUrl(runId, name));
}
