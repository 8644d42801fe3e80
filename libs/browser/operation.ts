import { BrowserToolError } from './errors.js';

/**
 * One tool call's limits: an absolute deadline (epoch ms) and the caller's AbortSignal. Every wait
 * inside the engine is bounded by both (STYLE: one deadline per long operation, abort checked).
 */
export interface OperationLimits {
  /** Epoch milliseconds after which the call gives back what it holds. */
  deadlineMs: number;
  signal?: AbortSignal;
  /**
   * Awaited once, after every refusal that comes before dispatch has passed and right before the
   * navigation or action goes to the page (the caller's effect watermark). If it throws, nothing is
   * dispatched and its error is the call's.
   */
  beforeDispatch?: () => Promise<void>;
}

export class Operation {
  readonly startedAtMs = Date.now();
  constructor(private readonly limits: OperationLimits) {}

  get signal(): AbortSignal | undefined {
    return this.limits.signal;
  }

  get deadlineMs(): number {
    return this.limits.deadlineMs;
  }

  remainingMs(): number {
    return Math.max(0, this.limits.deadlineMs - Date.now());
  }

  /** True once the deadline passed or the caller aborted. */
  ended(): boolean {
    return this.remainingMs() <= 0 || this.limits.signal?.aborted === true;
  }

  /** Runs the caller's {@link OperationLimits.beforeDispatch}, then checks the call is still live. */
  async beforeDispatch(what: string): Promise<void> {
    await this.limits.beforeDispatch?.();
    this.throwIfEnded(what);
  }

  elapsedMs(): number {
    return Date.now() - this.startedAtMs;
  }

  /** Throws when the call ended before `what` could start; nothing has been sent to the page yet. */
  throwIfEnded(what: string): void {
    if (this.limits.signal?.aborted) {
      throw new BrowserToolError('provider_unavailable', `the call was cancelled before ${what}`, true);
    }
    if (this.remainingMs() <= 0) {
      throw new BrowserToolError('provider_unavailable', `the call's deadline passed before ${what}`, true);
    }
  }
}

/** Sleeps up to `ms`, waking early when the signal aborts; never rejects. */
export function sleepMs(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0 || signal?.aborted) return Promise.resolve();
  // Node may fire a timer a millisecond before Date.now() has moved on by `ms`: the rest is slept
  // again, so a caller spacing its reads by the wall clock never reads early.
  const untilMs = Date.now() + ms;
  return new Promise((resolve) => {
    let timer: NodeJS.Timeout;
    const onAbort = () => {
      clearTimeout(timer);
      resolve();
    };
    const wake = () => {
      const leftMs = untilMs - Date.now();
      if (leftMs > 0) {
        timer = setTimeout(wake, leftMs);
        return;
      }
      signal?.removeEventListener('abort', onAbort);
      resolve();
    };
    timer = setTimeout(wake, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * Waits for `work` at most until `untilMs` or the signal aborts. Returns `{done: false}` then; the
 * work goes on and its rejection is swallowed, so nothing floats unhandled.
 */
export async function within<T>(
  work: Promise<T>,
  untilMs: number,
  signal?: AbortSignal,
): Promise<{ done: true; value: T } | { done: false }> {
  work.catch(() => undefined);
  const waitMs = untilMs - Date.now();
  if (waitMs <= 0 || signal?.aborted) {
    return { done: false };
  }
  let timer: NodeJS.Timeout | undefined;
  let onAbort: (() => void) | undefined;
  const stop = new Promise<{ done: false }>((resolve) => {
    timer = setTimeout(() => resolve({ done: false }), waitMs);
    onAbort = () => resolve({ done: false });
    signal?.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([work.then((value) => ({ done: true as const, value })), stop]);
  } finally {
    clearTimeout(timer);
    if (onAbort) signal?.removeEventListener('abort', onAbort);
  }
}
