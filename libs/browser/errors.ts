import { LeaseholdError, type ToolErrorCode } from '../contracts/index.js';

/**
 * A browser tool's refusal or failure with a stable `tool.browser.<code>` code (DESIGN §8). The
 * message says what was expected and what was found; it never carries page content.
 */
export class BrowserToolError extends LeaseholdError<ToolErrorCode> {
  override readonly name = 'BrowserToolError';
}

/** True when Playwright reports that the document an evaluation ran in went away. */
export function isNavigationTeardown(error: unknown): boolean {
  const message = error instanceof Error ? error.message : String(error);
  return /Execution context was destroyed|Cannot find context with specified id|Frame was detached|navigat/i.test(
    message,
  );
}
