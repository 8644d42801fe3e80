import { describe, expect, it } from 'vitest';
import {
  acquireIdempotencyKey,
  closeIdempotencyKey,
  DataPlaneClient,
  errorFromAnswer,
  errorFromTransport,
  failedBeforeConnecting,
  PROVIDER_ERROR_CODES,
  ProviderError,
  renewIdempotencyKey,
} from '../../libs/provider/index.js';

const refusal = (code: string, extra: Record<string, unknown> = {}) => ({
  error: { code, message: 'from the service', ...extra },
});

describe('data-plane answers as provider errors', () => {
  it('keeps the codes of refusals given before dispatch, for effects and reads alike', () => {
    for (const code of ['page_changed', 'element_not_found', 'action_not_allowed', 'url_disallowed']) {
      for (const operation of ['navigate', 'act', 'observe'] as const) {
        const error = errorFromAnswer(operation, 409, refusal(code));
        expect(error).toBeInstanceOf(ProviderError);
        expect(error).toMatchObject({ code, retryable: false, serviceCode: code, httpStatus: 409 });
      }
    }
  });

  it('makes any other failed answer to an effect outcome_unknown, never retryable (ADR-0127 d3)', () => {
    const answers: Array<[number, string]> = [
      [409, 'sequence_mismatch'],
      [409, 'lease_expired'],
      [422, 'invalid_arguments'],
      [500, 'internal'],
      [502, 'outcome_unknown'],
      [503, 'provider_unavailable'],
      [404, 'not_found'],
    ];
    for (const [status, code] of answers)
      for (const operation of ['navigate', 'act'] as const)
        expect(errorFromAnswer(operation, status, refusal(code))).toMatchObject({
          code: 'outcome_unknown',
          retryable: false,
          serviceCode: code,
        });
    expect(errorFromAnswer('act', 502, undefined)).toMatchObject({
      code: 'outcome_unknown',
      serviceCode: 'unknown',
    });
  });

  it('answers profile_unavailable for an effect whose lease the service refused', () => {
    expect(errorFromAnswer('act', 409, refusal('profile_unavailable'))).toMatchObject({
      code: 'profile_unavailable',
      retryable: false,
    });
  });

  it('makes 502 and 503 a retryable provider_unavailable outside effects', () => {
    for (const operation of ['acquire', 'observe', 'renew', 'close', 'get_lease'] as const) {
      expect(errorFromAnswer(operation, 503, refusal('provider_unavailable'))).toMatchObject({
        code: 'provider_unavailable',
        retryable: true,
      });
      expect(errorFromAnswer(operation, 502, '<html>bad gateway</html>')).toMatchObject({
        code: 'provider_unavailable',
        retryable: true,
      });
    }
  });

  it('keeps contention, expiry and sequence refusals with their facts, and none is retryable', () => {
    const contention = errorFromAnswer(
      'acquire',
      409,
      refusal('profile_unavailable', { holder_run_id: 'run_other', holder_attempt: 2 }),
    );
    expect(contention).toMatchObject({ code: 'profile_unavailable', retryable: false });
    expect(contention.facts).toEqual({ holder_run_id: 'run_other', holder_attempt: 2 });
    expect(errorFromAnswer('renew', 409, refusal('lease_expired'))).toMatchObject({ code: 'lease_expired' });
    expect(errorFromAnswer('observe', 409, refusal('sequence_mismatch'))).toMatchObject({
      code: 'sequence_mismatch',
      retryable: false,
    });
  });

  it('stops at once on authentication, idempotency conflicts and internal errors', () => {
    for (const [status, code] of [
      [401, 'unauthorized'],
      [409, 'idempotency_conflict'],
      [500, 'internal'],
    ] as const)
      expect(errorFromAnswer('acquire', status, refusal(code))).toMatchObject({
        code: 'provider_unavailable',
        retryable: false,
      });
    expect(errorFromAnswer('acquire', 409, refusal('idempotency_in_progress'))).toMatchObject({
      code: 'provider_unavailable',
      retryable: true,
    });
  });

  it('keeps a sealed state that does not open as its own permanent refusal, naming the profile and the worker', () => {
    const facts = { tenant: 't1', profile_id: 'shop', worker_id: 'bw-2', worker_key: '0a1b2c3d4e5f6071' };
    const mismatch = errorFromAnswer(
      'acquire',
      409,
      refusal('seal_key_mismatch', { ...facts, sealed_with: '3f9c0a1b2c3d4e5f' }),
    );
    expect(mismatch).toMatchObject({ code: 'seal_key_mismatch', retryable: false });
    expect(mismatch.message).toBe(
      'acquire answered 409 seal_key_mismatch: profile t1/shop was sealed with key 3f9c0a1b2c3d4e5f, which browser worker bw-2 does not hold (its seal key is 0a1b2c3d4e5f6071)',
    );
    const unreadable = errorFromAnswer(
      'acquire',
      409,
      refusal('profile_unreadable', { ...facts, sealed_with: '3f9c0a1b2c3d4e5f' }),
    );
    expect(unreadable).toMatchObject({ code: 'profile_unreadable', retryable: false });
    expect(unreadable.message).toBe(
      "acquire answered 409 profile_unreadable: profile t1/shop's sealed state does not open on browser worker bw-2 with the key that sealed it, 3f9c0a1b2c3d4e5f",
    );
    expect(unreadable.message).not.toContain('from the service');
  });

  it('says a page_changed was a capture cut off by the deadline when the service marks it so (ADR-0159)', () => {
    const read = errorFromAnswer('observe', 409, refusal('page_changed', { capture_timed_out: true }));
    expect(read).toMatchObject({ code: 'page_changed', retryable: false });
    expect(read.message).toMatch(/^observe answered 409 page_changed: the page's capture timed out/);
    const effect = errorFromAnswer(
      'navigate',
      409,
      refusal('page_changed', { dispatched: true, sequence: 1, capture_timed_out: true }),
    );
    expect(effect).toMatchObject({ code: 'page_changed', facts: { dispatched: true, sequence: 1 } });
    expect(effect.message).toMatch(
      /^navigate answered 409 page_changed: dispatched, then the page's capture timed out/,
    );
    // Unmarked, a page_changed reads as before.
    expect(errorFromAnswer('observe', 409, refusal('page_changed')).message).toBe(
      'observe answered 409 page_changed',
    );
  });

  it('reads an unknown profile as profile_unavailable and an unknown lease as lease_expired', () => {
    expect(errorFromAnswer('acquire', 404, refusal('not_found'))).toMatchObject({
      code: 'profile_unavailable',
    });
    expect(errorFromAnswer('observe', 404, refusal('not_found'))).toMatchObject({ code: 'lease_expired' });
    expect(errorFromAnswer('close', 404, refusal('not_found'))).toMatchObject({ code: 'lease_expired' });
  });

  it('carries neither the service message nor page-like text into the error', () => {
    const error = errorFromAnswer(
      'observe',
      409,
      refusal('element_not_found', { message: 'secret page text', field: 'a value with spaces' }),
    );
    expect(error.message).not.toContain('secret');
    expect(error.facts).toEqual({});
  });

  it('uses only the closed set of codes', () => {
    const codes = new Set<string>(PROVIDER_ERROR_CODES);
    for (const status of [400, 401, 404, 409, 413, 422, 429, 500, 502, 503])
      for (const code of ['x', 'conflict', 'payload_too_large', 'validation_failed', 'lease_expired'])
        for (const operation of ['acquire', 'act', 'observe'] as const)
          expect(codes.has(errorFromAnswer(operation, status, refusal(code)).code)).toBe(true);
  });
});

describe('lost answers as provider errors', () => {
  it('makes refusals, losses and timeouts a retryable provider_unavailable outside effects', () => {
    for (const transport of ['not_connected', 'connection_lost', 'timeout'] as const)
      expect(errorFromTransport('acquire', transport)).toMatchObject({
        code: 'provider_unavailable',
        retryable: true,
        transport,
      });
    expect(errorFromTransport('acquire', 'cancelled')).toMatchObject({ retryable: false });
    expect(errorFromTransport('acquire', 'invalid_answer')).toMatchObject({ retryable: false });
  });

  it('makes an effect without an answer outcome_unknown unless it never connected', () => {
    for (const transport of ['connection_lost', 'timeout', 'cancelled', 'invalid_answer'] as const)
      expect(errorFromTransport('act', transport)).toMatchObject({
        code: 'outcome_unknown',
        retryable: false,
      });
    expect(errorFromTransport('navigate', 'not_connected')).toMatchObject({ code: 'provider_unavailable' });
  });

  it('tells a refused connection from a lost one', () => {
    const refused = Object.assign(new TypeError('fetch failed'), {
      cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }),
    });
    const everyAddressRefused = Object.assign(new TypeError('fetch failed'), {
      cause: new AggregateError([
        Object.assign(new Error('a'), { code: 'ECONNREFUSED' }),
        Object.assign(new Error('b'), { code: 'ECONNREFUSED' }),
      ]),
    });
    const lost = Object.assign(new TypeError('fetch failed'), {
      cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
    });
    expect(failedBeforeConnecting(refused)).toBe(true);
    expect(failedBeforeConnecting(everyAddressRefused)).toBe(true);
    expect(failedBeforeConnecting(lost)).toBe(false);
    expect(failedBeforeConnecting(new Error('anything'))).toBe(false);
  });
});

describe('idempotency keys', () => {
  it('derives the acquisition key from the invocation alone, the same every time', () => {
    const key = acquireIdempotencyKey('run_abc:3:0');
    expect(acquireIdempotencyKey('run_abc:3:0')).toBe(key);
    expect(acquireIdempotencyKey('run_abc:3:1')).not.toBe(key);
    expect(() => acquireIdempotencyKey('')).toThrow();
  });

  it('fits the data plane header rule', () => {
    const rule = /^[A-Za-z0-9_.:-]{1,128}$/;
    expect(acquireIdempotencyKey('a very long invocation id / with spaces '.repeat(10))).toMatch(rule);
    expect(renewIdempotencyKey('lse_abcdefgh12345678', 1_900_000_000_000)).toMatch(rule);
    expect(closeIdempotencyKey('lse_abcdefgh12345678', true)).toMatch(rule);
    expect(closeIdempotencyKey('lse_abcdefgh12345678', true)).not.toBe(
      closeIdempotencyKey('lse_abcdefgh12345678', false),
    );
  });
});

describe('page calls out of time', () => {
  it('sends nothing when the deadline leaves no time for an answer, and says so without outcome_unknown', async () => {
    let sent = 0;
    const client = new DataPlaneClient({
      baseUrl: 'http://127.0.0.1:9',
      token: 'token',
      fetch: async () => {
        sent += 1;
        return new Response('{}');
      },
    });
    const error = await client
      .act({ tenant: 't1', id: 'p1' }, 'lse_abcdefgh12345678', 2, {}, { deadlineMs: Date.now() + 100 })
      .catch((reason: unknown) => reason);
    expect(error).toMatchObject({ code: 'provider_unavailable', retryable: false, transport: 'timeout' });
    expect(sent).toBe(0);
  });
});
