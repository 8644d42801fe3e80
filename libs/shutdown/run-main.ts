import { LeaseholdError } from '../contracts/index.js';
/** A start-up failure the operator can fix: a missing Redis or Chromium, a port in use. */
export class StartupError extends LeaseholdError<'startup_failed'> {
  override readonly name = 'StartupError';
  constructor(message: string, options?: { cause?: unknown }) {
    super('startup_failed', message, false, options);
  }
}

const OPERATOR_ERRORS = new Set(['StartupError', 'ConfigError']);

/**
 * The one way an app's `main.ts` starts: a start-up failure the operator can fix (a bad setting,
 * a missing Redis or Chromium) prints one line on stderr and exits 1. Anything else is a defect
 * and keeps its stack.
 */
export function runMain(role: string, start: () => Promise<unknown>): void {
  start().catch((error: unknown) => {
    if (error instanceof Error && OPERATOR_ERRORS.has(error.name)) {
      console.error(`leasehold ${role}: ${error.message}`);
    } else {
      console.error(`leasehold ${role}: start-up failed`, error);
    }
    process.exit(1);
  });
}
