/**
 * How `leasehold` ends (documented in `leasehold --help` and the README). One table, so a script
 * calling the CLI can tell a run that failed from a command it got wrong or an API it cannot reach.
 */
export const EXIT_CODES = {
  /** The command did what it was asked; `runs watch`: the run succeeded. */
  ok: 0,
  /** The API answered an error (`error <code>: <message>`); `runs watch`: the run failed. */
  failed: 1,
  /** Bad flags or arguments: nothing was sent. */
  usage: 2,
  /** `runs watch`: the run was cancelled. */
  cancelled: 3,
  /** The API could not be reached (or the event stream kept breaking). */
  connection: 4,
} as const;
export type ExitCode = (typeof EXIT_CODES)[keyof typeof EXIT_CODES];

/** A failure the CLI reports as one line, `error <code>: <message>`, and ends with `exitCode`. */
export class CliError extends Error {
  override readonly name: string = 'CliError';
  constructor(
    readonly code: string,
    message: string,
    readonly exitCode: ExitCode,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

/** The API's own `{error: {code, message}}`, as it answered it. */
export class ApiAnswerError extends CliError {
  override readonly name = 'ApiAnswerError';
  constructor(
    code: string,
    message: string,
    readonly status: number,
  ) {
    super(code, message, EXIT_CODES.failed);
  }
}

/** Arguments the CLI cannot send: reported as `error: <message>` like commander's own, exit 2. */
export class UsageError extends CliError {
  override readonly name = 'UsageError';
  constructor(message: string) {
    super('usage', message, EXIT_CODES.usage);
  }
}

/** No answer at all from the API: refused, reset, a DNS failure. */
export class ConnectionError extends CliError {
  override readonly name = 'ConnectionError';
  constructor(apiUrl: string, cause: unknown) {
    super('connection_failed', `no answer from ${apiUrl}: ${describeCause(cause)}`, EXIT_CODES.connection, {
      cause,
    });
  }
}

/** fetch's `TypeError: fetch failed` hides the reason (ECONNREFUSED…) in its cause. */
function describeCause(error: unknown): string {
  let current = error;
  let text = 'unknown error';
  for (let depth = 0; depth < 4 && current instanceof Error; depth += 1) {
    const code = (current as { code?: unknown }).code;
    text = typeof code === 'string' ? `${code} (${current.message})` : current.message;
    current = current.cause;
  }
  return text;
}
