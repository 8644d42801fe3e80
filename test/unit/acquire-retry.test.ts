import { describe, expect, it } from 'vitest';
import {
  type AcquireAttemptDiagnostic,
  type AcquireRetryPolicy,
  acquireBackoffMs,
  acquireWithRetry,
  BOUNDED_ACQUIRE_RETRY,
  compileAcquireRetryPolicy,
  decideAfterFailedAcquire,
  errorFromAnswer,
  errorFromTransport,
  ProviderError,
  SINGLE_ACQUIRE_ATTEMPT,
} from '../../libs/provider/index.js';

const unavailable = () =>
  errorFromAnswer('acquire', 503, { error: { code: 'unavailable', message: 'busy' } });

/** A clock and a sleep that only move each other: no timers, no I/O. */
function fakeTime(startMs = 1_000_000) {
  const time = {
    nowMs: startMs,
    slept: [] as number[],
    clock: () => time.nowMs,
    sleep: async (ms: number) => {
      time.slept.push(ms);
      time.nowMs += ms;
    },
  };
  return time;
}

/** An attempt that fails with each given error in turn, then answers `lease`. */
function scripted(failures: unknown[], onAttempt: () => void = () => undefined) {
  const attempts: number[] = [];
  return {
    attempts,
    attempt: async (index: number) => {
      attempts.push(index);
      onAttempt();
      const failure = failures[index - 1];
      if (failure !== undefined) throw failure;
      return 'lease';
    },
  };
}

describe('acquisition backoff schedule (ADR-0177)', () => {
  it('keeps the first delay in [250, 500] ms and the second in [500, 1000] ms for any invocation', () => {
    const first = new Set<number>();
    for (let run = 0; run < 2_000; run += 1) {
      const invocationId = `run_${run}-a1-s${run % 7}-i${run % 3}`;
      const one = acquireBackoffMs(invocationId, 1);
      const two = acquireBackoffMs(invocationId, 2);
      expect(one).toBeGreaterThanOrEqual(250);
      expect(one).toBeLessThanOrEqual(500);
      expect(two).toBeGreaterThanOrEqual(500);
      expect(two).toBeLessThanOrEqual(1_000);
      expect(Number.isInteger(one) && Number.isInteger(two)).toBe(true);
      first.add(one);
    }
    // Jittered: invocations failing together spread over the window instead of returning in step.
    expect(first.size).toBeGreaterThan(150);
  });

  it('derives the same delay from the same invocation id and attempt index, in any process', () => {
    expect(acquireBackoffMs('run_x-a1-s3-i0', 1)).toBe(acquireBackoffMs('run_x-a1-s3-i0', 1));
    expect(acquireBackoffMs('run_x-a1-s3-i0', 2)).toBe(acquireBackoffMs('run_x-a1-s3-i0', 2));
    const ids = ['run_x-a1-s3-i0', 'run_x-a1-s3-i1', 'run_x-a2-s3-i0', 'run_y-a1-s3-i0'];
    expect(new Set(ids.map((id) => acquireBackoffMs(id, 1))).size).toBeGreaterThan(1);
  });

  it('has no delay after the last attempt', () => {
    expect(() => acquireBackoffMs('run_x-a1-s1-i0', 3)).toThrow(RangeError);
    expect(() => acquireBackoffMs('run_x-a1-s1-i0', 1, SINGLE_ACQUIRE_ATTEMPT)).toThrow(RangeError);
  });

  it('refuses a policy of more than three attempts or with windows that do not match its attempts', () => {
    expect(compileAcquireRetryPolicy(BOUNDED_ACQUIRE_RETRY)).toEqual(BOUNDED_ACQUIRE_RETRY);
    expect(() => compileAcquireRetryPolicy({ maxAttempts: 4, backoffWindowsMs: [] })).toThrow(/1 to 3/);
    expect(() => compileAcquireRetryPolicy({ maxAttempts: 3, backoffWindowsMs: [[250, 500]] })).toThrow(
      /2 windows/,
    );
    expect(() => compileAcquireRetryPolicy({ maxAttempts: 2, backoffWindowsMs: [[500, 250]] })).toThrow(
      /min <= max/,
    );
  });
});

describe('whether a failed acquisition attempt permits another (ADR-0177)', () => {
  const base = {
    policy: BOUNDED_ACQUIRE_RETRY,
    invocationId: 'run_d-a1-s1-i0',
    attempt: 1,
    nowMs: 0,
    deadlineMs: 10_000,
    cancelled: false,
  };

  it('retries connection refused or reset, a timeout with time left, and 502/503', () => {
    for (const error of [
      errorFromTransport('acquire', 'not_connected'),
      errorFromTransport('acquire', 'connection_lost'),
      errorFromTransport('acquire', 'timeout'),
      errorFromAnswer('acquire', 502, undefined),
      unavailable(),
    ])
      expect(decideAfterFailedAcquire({ ...base, error })).toEqual({
        next: 'retry',
        delayMs: acquireBackoffMs(base.invocationId, 1),
      });
  });

  it('stops at once on authentication, protected account, contention, revocation, invalid output and other refusals', () => {
    const refusals = [
      errorFromAnswer('acquire', 401, { error: { code: 'unauthorized' } }),
      errorFromAnswer('acquire', 409, { error: { code: 'profile_unavailable', holder_run_id: 'run_h' } }),
      errorFromAnswer('acquire', 404, { error: { code: 'not_found' } }),
      errorFromAnswer('acquire', 409, { error: { code: 'idempotency_conflict' } }),
      errorFromAnswer('acquire', 500, { error: { code: 'internal' } }),
      errorFromTransport('acquire', 'invalid_answer'),
      errorFromTransport('acquire', 'cancelled'),
      new ProviderError('lease_expired', 'acquire answered a revoked lease', false, { operation: 'acquire' }),
      new Error('not a provider error'),
    ];
    for (const error of refusals)
      expect(decideAfterFailedAcquire({ ...base, error })).toEqual({ next: 'stop', reason: 'not_retryable' });
  });

  it('stops at the third attempt, or at the first under the single-attempt policy', () => {
    expect(decideAfterFailedAcquire({ ...base, attempt: 2, error: unavailable() })).toMatchObject({
      next: 'retry',
    });
    expect(decideAfterFailedAcquire({ ...base, attempt: 3, error: unavailable() })).toEqual({
      next: 'stop',
      reason: 'exhausted',
    });
    expect(
      decideAfterFailedAcquire({ ...base, policy: SINGLE_ACQUIRE_ATTEMPT, error: unavailable() }),
    ).toEqual({ next: 'stop', reason: 'exhausted' });
  });

  it('stops when cancelled, and when the delay would reach the deadline', () => {
    expect(decideAfterFailedAcquire({ ...base, cancelled: true, error: unavailable() })).toEqual({
      next: 'stop',
      reason: 'cancelled',
    });
    const delayMs = acquireBackoffMs(base.invocationId, 1);
    expect(decideAfterFailedAcquire({ ...base, deadlineMs: delayMs, error: unavailable() })).toEqual({
      next: 'stop',
      reason: 'deadline',
    });
    expect(
      decideAfterFailedAcquire({ ...base, deadlineMs: delayMs + 1, error: unavailable() }),
    ).toMatchObject({
      next: 'retry',
    });
    // A timed-out attempt that used the deadline up.
    expect(
      decideAfterFailedAcquire({
        ...base,
        nowMs: 10_000,
        error: errorFromTransport('acquire', 'timeout'),
      }),
    ).toEqual({ next: 'stop', reason: 'deadline' });
  });
});

describe('acquireWithRetry', () => {
  function run(
    failures: unknown[],
    options: { deadlineMs?: number; signal?: AbortSignal; policy?: AcquireRetryPolicy } = {},
  ) {
    const time = fakeTime();
    const diagnostics: AcquireAttemptDiagnostic[] = [];
    const script = scripted(failures, () => {
      time.nowMs += 10;
    });
    const result = acquireWithRetry(script.attempt, {
      policy: options.policy ?? BOUNDED_ACQUIRE_RETRY,
      invocationId: 'run_w-a1-s2-i0',
      deadlineMs: time.nowMs + (options.deadlineMs ?? 10_000),
      signal: options.signal,
      clock: time.clock,
      sleep: time.sleep,
      onAttemptFailed: (diagnostic) => {
        diagnostics.push(diagnostic);
      },
    });
    return { result, time, diagnostics, attempts: script.attempts };
  }

  it('answers at the second and at the third attempt after the scheduled delays', async () => {
    const second = run([unavailable()]);
    await expect(second.result).resolves.toBe('lease');
    expect(second.attempts).toEqual([1, 2]);
    expect(second.time.slept).toEqual([acquireBackoffMs('run_w-a1-s2-i0', 1)]);

    const third = run([unavailable(), errorFromTransport('acquire', 'connection_lost')]);
    await expect(third.result).resolves.toBe('lease');
    expect(third.attempts).toEqual([1, 2, 3]);
    expect(third.time.slept).toEqual([
      acquireBackoffMs('run_w-a1-s2-i0', 1),
      acquireBackoffMs('run_w-a1-s2-i0', 2),
    ]);
  });

  it('throws the last failure after three attempts, its code and message kept and marked unverified (ADR-0177)', async () => {
    const last = unavailable();
    const exhausted = run([unavailable(), unavailable(), last, unavailable()]);
    await expect(exhausted.result).rejects.toMatchObject({
      code: last.code,
      message: last.message,
      unverified: true,
      cause: last,
    });
    expect(last.unverified).toBe(false);
    expect(exhausted.attempts).toEqual([1, 2, 3]);
    expect(exhausted.diagnostics.map((diagnostic) => diagnostic.stop_reason)).toEqual([
      null,
      null,
      'exhausted',
    ]);
  });

  it('throws a provider without recovery its single failure unchanged, not marked unverified', async () => {
    const only = unavailable();
    const single = run([only], { policy: SINGLE_ACQUIRE_ATTEMPT });
    await expect(single.result).rejects.toBe(only);
    expect(only.unverified).toBe(false);
  });

  it('stops at once on a refusal after a transient failure, with no further delay', async () => {
    const refused = errorFromAnswer('acquire', 409, { error: { code: 'profile_unavailable' } });
    const stopped = run([unavailable(), refused]);
    // A refusal is a verified answer: thrown unchanged, never marked unverified.
    await expect(stopped.result).rejects.toBe(refused);
    expect(refused.unverified).toBe(false);
    expect(stopped.attempts).toEqual([1, 2]);
    expect(stopped.time.slept).toHaveLength(1);
  });

  it('checks cancellation after the sleep and sends nothing more', async () => {
    const controller = new AbortController();
    const first = unavailable();
    const time = fakeTime();
    const diagnostics: AcquireAttemptDiagnostic[] = [];
    const script = scripted([first]);
    const result = acquireWithRetry(script.attempt, {
      policy: BOUNDED_ACQUIRE_RETRY,
      invocationId: 'run_c-a1-s1-i0',
      deadlineMs: time.nowMs + 10_000,
      signal: controller.signal,
      clock: time.clock,
      sleep: async (ms) => {
        await time.sleep(ms);
        controller.abort();
      },
      onAttemptFailed: (diagnostic) => {
        diagnostics.push(diagnostic);
      },
    });
    await expect(result).rejects.toBe(first);
    expect(script.attempts).toEqual([1]);
    expect(
      diagnostics.map((diagnostic) => [diagnostic.attempt, diagnostic.outcome, diagnostic.stop_reason]),
    ).toEqual([
      [1, 'failed', null],
      [2, 'not_sent', 'cancelled'],
    ]);
  });

  it('sends nothing when the call is already cancelled or out of time', async () => {
    const controller = new AbortController();
    controller.abort();
    const cancelled = run([], { signal: controller.signal });
    await expect(cancelled.result).rejects.toMatchObject({
      code: 'provider_unavailable',
      retryable: false,
      transport: 'cancelled',
    });
    expect(cancelled.attempts).toEqual([]);
    const late = run([], { deadlineMs: 0 });
    await expect(late.result).rejects.toMatchObject({ code: 'provider_unavailable', transport: 'timeout' });
    expect(late.attempts).toEqual([]);
  });

  it('never sleeps into the deadline', async () => {
    const first = unavailable();
    const short = run([first], { deadlineMs: 200 });
    // Out of time for the recovery: the same failure, explicitly unverified (ADR-0177).
    await expect(short.result).rejects.toMatchObject({ code: first.code, unverified: true, cause: first });
    expect(short.time.slept).toEqual([]);
    expect(short.diagnostics).toMatchObject([{ next: 'stop', stop_reason: 'deadline' }]);
  });

  it('reports each failed attempt with codes and numbers only', async () => {
    const secret = errorFromAnswer('acquire', 503, {
      error: { code: 'unavailable', message: 'cookie=abc page says hello', note: 'token-123' },
    });
    const reported = run([
      secret,
      errorFromTransport('acquire', 'connection_lost', new Error('socket hang up')),
    ]);
    await reported.result;
    expect(reported.diagnostics).toEqual([
      {
        invocation_id: 'run_w-a1-s2-i0',
        attempt: 1,
        max_attempts: 3,
        outcome: 'failed',
        code: 'provider_unavailable',
        retryable: true,
        transport: null,
        http_status: 503,
        service_code: 'unavailable',
        elapsed_ms: 10,
        next: 'retry',
        delay_ms: acquireBackoffMs('run_w-a1-s2-i0', 1),
        stop_reason: null,
      },
      expect.objectContaining({ attempt: 2, transport: 'connection_lost', http_status: null }),
    ]);
    const text = JSON.stringify(reported.diagnostics);
    for (const content of ['cookie', 'hello', 'token-123', 'socket hang up'])
      expect(text).not.toContain(content);
  });

  it('ends the acquisition with the error of a diagnostic sink that throws', async () => {
    const time = fakeTime();
    const lost = new Error('the run was lost');
    const script = scripted([unavailable()]);
    const result = acquireWithRetry(script.attempt, {
      policy: BOUNDED_ACQUIRE_RETRY,
      invocationId: 'run_l-a1-s1-i0',
      deadlineMs: time.nowMs + 10_000,
      clock: time.clock,
      sleep: time.sleep,
      onAttemptFailed: () => {
        throw lost;
      },
    });
    await expect(result).rejects.toBe(lost);
    expect(script.attempts).toEqual([1]);
  });
});
