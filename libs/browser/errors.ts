import { type BrowserObservation, LeaseholdError, type ToolErrorCode } from '../contracts/index.js';

/**
 * A browser tool's refusal or failure with a stable `tool.browser.<code>` code (DESIGN §8). The
 * message says what was expected and what was found; it never carries page content.
 */
export class BrowserToolError extends LeaseholdError<ToolErrorCode> {
  override readonly name: string = 'BrowserToolError';
}

/**
 * ADR-0159: a capture the call's deadline cut off. It is `page_changed` (earlier references are
 * void), but told apart, so the answer can say the capture timed out rather than send a reader
 * looking for a page that changed.
 */
export class CaptureTimedOutError extends BrowserToolError {
  override readonly name = 'CaptureTimedOutError';
  constructor(message: string) {
    super('page_changed', message);
  }
}

/** True when Playwright reports that the document an evaluation ran in went away. */
export function isNavigationTeardown(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /Execution context was destroyed|Cannot find context with specified id|Frame was detached|navigat/i.test(
    message,
  );
}

/**
 * A navigation whose request provably never reached a server (see `neverReachedServer`): nothing
 * happened anywhere, but the page now shows Chromium's error page, so earlier references are void
 * and the error carries a fresh observation of it.
 */
export class NavigationFailedError extends BrowserToolError {
  override readonly name = 'NavigationFailedError';
  constructor(
    /** Chromium's error name, `net::ERR_…`. */
    readonly netError: string,
    /** The error page, observed after the failure. */
    readonly outcome: { observation: BrowserObservation; evidenceKey: string },
    options?: { cause?: unknown },
  ) {
    super('navigation_failed', `the navigation never reached a server: ${netError}`, false, options);
  }
}
