import { createHash } from 'node:crypto';
import { setTimeout as sleepFor } from 'node:timers/promises';
import { ProviderError, type ProviderErrorCode, type TransportFailure } from './errors.js';

/**
 * ADR-0177: bounded lease-acquisition recovery inside one tool invocation. Only acquisition is
 * wrapped; at most three attempts; only a retryable `provider_unavailable` permits another; the
 * delays are jittered deterministically from the durable invocation id and the attempt index; every
 * attempt and every delay lives inside the tool deadline (itself bounded by the run's), which is
 * never extended.
 */

/** How many attempts one invocation's acquisition may make, and the delay window before each retry. */
export interface AcquireRetryPolicy {
  /** Attempts per tool invocation, the first included: 1 (no recovery) to 3 (ADR-0177's bound). */
  readonly maxAttempts: number;
  /**
   * `[minMs, maxMs]` of the delay after failed attempt k (index k - 1); one window per retry, so
   * exactly `maxAttempts - 1` of them. A window too wide lets a short tool deadline end in a sleep;
   * a window of 0 hammers a service that just said it is overloaded.
   */
  readonly backoffWindowsMs: readonly (readonly [number, number])[];
}

/** ADR-0177: three attempts, delays in [0.25, 0.5] s then [0.5, 1] s. Production composition installs it. */
export const BOUNDED_ACQUIRE_RETRY: AcquireRetryPolicy = Object.freeze({
  maxAttempts: 3,
  backoffWindowsMs: Object.freeze([Object.freeze([250, 500] as const), Object.freeze([500, 1_000] as const)]),
});

/** An independently constructed provider's default: one attempt, no recovery (ADR-0177). */
export const SINGLE_ACQUIRE_ATTEMPT: AcquireRetryPolicy = Object.freeze({
  maxAttempts: 1,
  backoffWindowsMs: Object.freeze([]),
});

/** Checks a policy once, at construction: a bad one is a programming error, refused loudly. */
export function compileAcquireRetryPolicy(policy: AcquireRetryPolicy): AcquireRetryPolicy {
  const { maxAttempts, backoffWindowsMs } = policy;
  if (!Number.isInteger(maxAttempts) || maxAttempts < 1 || maxAttempts > 3)
    throw new RangeError(`acquireRetry.maxAttempts: expected 1 to 3 (ADR-0177), got ${maxAttempts}`);
  if (backoffWindowsMs.length !== maxAttempts - 1)
    throw new RangeError(
      `acquireRetry.backoffWindowsMs: expected ${maxAttempts - 1} windows for ${maxAttempts} attempts, got ${backoffWindowsMs.length}`,
    );
  for (const [index, [minMs, maxMs]] of backoffWindowsMs.entries())
    if (!Number.isInteger(minMs) || !Number.isInteger(maxMs) || minMs < 1 || maxMs < minMs)
      throw new RangeError(
        `acquireRetry.backoffWindowsMs[${index}]: expected integers 1 <= min <= max, got [${minMs}, ${maxMs}]`,
      );
  return Object.freeze({
    maxAttempts,
    backoffWindowsMs: Object.freeze(
      backoffWindowsMs.map(([minMs, maxMs]) => Object.freeze([minMs, maxMs] as const)),
    ),
  });
}

/**
 * The delay after failed attempt `failedAttempt` (1-based) of the invocation: a point of that
 * attempt's window chosen by a SHA-256 of the invocation id and the attempt index, so a resumed
 * worker repeating the invocation waits as the first did, and invocations of many runs failing
 * together spread out instead of returning in step.
 */
export function acquireBackoffMs(
  invocationId: string,
  failedAttempt: number,
  policy: AcquireRetryPolicy = BOUNDED_ACQUIRE_RETRY,
): number {
  const window = policy.backoffWindowsMs[failedAttempt - 1];
  if (!window)
    throw new RangeError(`no backoff after attempt ${failedAttempt} of at most ${policy.maxAttempts}`);
  const [minMs, maxMs] = window;
  const digest = createHash('sha256').update(`acquire-backoff\n${invocationId}\n${failedAttempt}`).digest();
  const fraction = digest.readUInt32BE(0) / 2 ** 32; // [0, 1)
  return minMs + Math.floor(fraction * (maxMs - minMs + 1));
}

/** Why an invocation's acquisition stopped without a lease. */
export type AcquireStopReason = 'not_retryable' | 'exhausted' | 'deadline' | 'cancelled';

export type AcquireRetryDecision =
  | { next: 'retry'; delayMs: number }
  | { next: 'stop'; reason: AcquireStopReason };

/** ADR-0177: only a retryable `provider_unavailable` (refused, reset, timed out, 502/503) permits another attempt. */
export function permitsAnotherAttempt(error: unknown): error is ProviderError {
  return error instanceof ProviderError && error.code === 'provider_unavailable' && error.retryable;
}

/**
 * The rule after a failed attempt: stop on anything but a retryable `provider_unavailable`, at the
 * last attempt, when cancelled, and when the delay would reach the deadline (an attempt that used
 * the deadline up is the case of no time left at all); otherwise retry after the attempt's delay.
 */
export function decideAfterFailedAcquire(input: {
  policy: AcquireRetryPolicy;
  invocationId: string;
  /** The attempt that failed, 1-based. */
  attempt: number;
  error: unknown;
  nowMs: number;
  deadlineMs: number;
  cancelled: boolean;
}): AcquireRetryDecision {
  if (!permitsAnotherAttempt(input.error)) return { next: 'stop', reason: 'not_retryable' };
  if (input.attempt >= input.policy.maxAttempts) return { next: 'stop', reason: 'exhausted' };
  if (input.cancelled) return { next: 'stop', reason: 'cancelled' };
  const delayMs = acquireBackoffMs(input.invocationId, input.attempt, input.policy);
  // Never sleep into the deadline: the attempt after it would have no time, and the deadline never moves.
  if (input.nowMs + delayMs >= input.deadlineMs) return { next: 'stop', reason: 'deadline' };
  return { next: 'retry', delayMs };
}

/**
 * One failed acquisition attempt as the run's events keep it: bounded (at most `max_attempts`
 * per invocation, fixed fields) and content-free — codes, numbers and the invocation id only, never
 * a message, a URL, page content or anything the service said beyond its stable code.
 */
export interface AcquireAttemptDiagnostic {
  invocation_id: string;
  /** 1-based. */
  attempt: number;
  max_attempts: number;
  /** `failed`: the attempt was sent and failed; `not_sent`: it was not sent after a backoff (cancelled, out of time). */
  outcome: 'failed' | 'not_sent';
  /** The failure's stable code (for `not_sent`, the code the invocation ends with); `unexpected` for a non-provider error. */
  code: ProviderErrorCode | 'unexpected';
  retryable: boolean;
  transport: TransportFailure | null;
  http_status: number | null;
  service_code: string | null;
  /** Since the invocation's first attempt began. */
  elapsed_ms: number;
  next: 'retry' | 'stop';
  delay_ms: number | null;
  stop_reason: AcquireStopReason | null;
}

export interface AcquireWithRetryOptions {
  policy: AcquireRetryPolicy;
  /** The durable invocation id: the jitter's seed (ADR-0177). */
  invocationId: string;
  /** The tool deadline (epoch ms), already bounded by the run's; shared by every attempt and delay. */
  deadlineMs: number;
  signal?: AbortSignal | undefined;
  /** Epoch ms; the provider's clock. */
  clock: () => number;
  /** Awaited after each failed attempt; a throw ends the acquisition with that error. */
  onAttemptFailed?: ((diagnostic: AcquireAttemptDiagnostic) => Promise<void> | void) | undefined;
  /** Tests: another sleep; resolves early (without throwing) when `signal` aborts. */
  sleep?: (ms: number, signal: AbortSignal | undefined) => Promise<void>;
}

/**
 * Runs `attempt` (one complete acquisition, the same request each time) at most `policy.maxAttempts`
 * times. Cancellation and remaining time are checked before each attempt and after each sleep. On
 * stopping it throws the last attempt's error — its code and message kept, so exhaustion keeps the
 * stable failure — marked unverified when the recovery ran out (`recoveryEnded`).
 */
export async function acquireWithRetry<T>(
  attempt: (index: number) => Promise<T>,
  options: AcquireWithRetryOptions,
): Promise<T> {
  const { policy, invocationId, deadlineMs, signal, clock } = options;
  const sleep = options.sleep ?? abortableSleep;
  const startedAtMs = clock();
  const report = async (
    diagnostic: Omit<AcquireAttemptDiagnostic, 'invocation_id' | 'max_attempts' | 'elapsed_ms'>,
  ) =>
    options.onAttemptFailed?.({
      invocation_id: invocationId,
      max_attempts: policy.maxAttempts,
      elapsed_ms: Math.max(0, clock() - startedAtMs),
      ...diagnostic,
    });

  const unsent = notSentReason(signal, clock(), deadlineMs);
  if (unsent)
    throw new ProviderError(
      'provider_unavailable',
      `acquire was not sent: ${unsent === 'cancelled' ? 'the call was cancelled' : 'its deadline left no time'}`,
      false,
      { operation: 'acquire', transport: unsent === 'cancelled' ? 'cancelled' : 'timeout' },
    );

  for (let index = 1; ; index += 1) {
    try {
      return await attempt(index);
    } catch (error) {
      const decision = decideAfterFailedAcquire({
        policy,
        invocationId,
        attempt: index,
        error,
        nowMs: clock(),
        deadlineMs,
        cancelled: signal?.aborted ?? false,
      });
      await report({
        attempt: index,
        outcome: 'failed',
        ...failureFacts(error),
        next: decision.next,
        delay_ms: decision.next === 'retry' ? decision.delayMs : null,
        stop_reason: decision.next === 'stop' ? decision.reason : null,
      });
      if (decision.next === 'stop') throw recoveryEnded(error, decision.reason, policy);

      await sleep(decision.delayMs, signal);
      const stopped = notSentReason(signal, clock(), deadlineMs);
      if (stopped) {
        await report({
          attempt: index + 1,
          outcome: 'not_sent',
          ...failureFacts(error),
          next: 'stop',
          delay_ms: null,
          stop_reason: stopped,
        });
        throw recoveryEnded(error, stopped, policy);
      }
    }
  }
}

/**
 * ADR-0177: "Exhaustion preserves the original stable failure and the workflow's explicit
 * unverified outcome." When the recovery policy ran out — its attempts, or the time for another —
 * on a failure that would have permitted one, the last failure is thrown with its code and message
 * kept and marked unverified. A refusal, a cancel, or a provider without recovery throws it unchanged.
 */
function recoveryEnded(error: unknown, reason: AcquireStopReason, policy: AcquireRetryPolicy): unknown {
  const ranOut = reason === 'exhausted' || reason === 'deadline';
  return ranOut && policy.maxAttempts > 1 && error instanceof ProviderError ? error.asUnverified() : error;
}

function notSentReason(
  signal: AbortSignal | undefined,
  nowMs: number,
  deadlineMs: number,
): 'cancelled' | 'deadline' | undefined {
  if (signal?.aborted) return 'cancelled';
  if (nowMs >= deadlineMs) return 'deadline';
  return undefined;
}

const STABLE_CODE = /^[a-z][a-z0-9_.]{0,63}$/;

/** The content-free facts of a failure; anything not a ProviderError is reported as an untyped one. */
function failureFacts(
  error: unknown,
): Pick<AcquireAttemptDiagnostic, 'code' | 'retryable' | 'transport' | 'http_status' | 'service_code'> {
  if (!(error instanceof ProviderError))
    return { code: 'unexpected', retryable: false, transport: null, http_status: null, service_code: null };
  return {
    code: error.code,
    retryable: error.retryable,
    transport: error.transport ?? null,
    http_status: error.httpStatus ?? null,
    // The service's own code is a stable identifier; anything else it said stays out.
    service_code:
      error.serviceCode !== undefined && STABLE_CODE.test(error.serviceCode) ? error.serviceCode : null,
  };
}

/** Waits `ms`, ending early (never throwing) when `signal` aborts; the caller checks the signal after. */
async function abortableSleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  try {
    await sleepFor(ms, undefined, signal ? { signal } : {});
  } catch (error) {
    if (!(signal?.aborted && (error as { name?: unknown }).name === 'AbortError')) throw error;
  }
}
