import pino, { type Logger } from 'pino';

export type { Logger } from 'pino';

export interface LoggerOptions {
  level: string;
  /** true: pretty; false: JSON; undefined: pretty only when stdout is a TTY. */
  pretty: boolean | undefined;
  /** The role, carried on every line (`api`, `run-worker`, `fleet`, …). */
  name: string;
}

/** pino JSON, one line per event; pretty printing only when asked for or on a terminal. */
export function createLogger(options: LoggerOptions): Logger {
  const pretty = options.pretty ?? process.stdout.isTTY === true;
  return pino({
    name: options.name,
    level: options.level,
    // Never let a credential reach a log line, whichever object carries it.
    redact: {
      paths: ['*.authorization', '*.headers.authorization', '*.token', '*.sealKey', '*.password'],
      censor: '[redacted]',
    },
    ...(pretty
      ? { transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } }
      : {}),
  });
}
