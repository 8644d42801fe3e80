import { describe, expect, it } from 'vitest';
import { ADR_0127 } from '../../libs/config/index.js';
import { compileLeaseServiceOptions, type LeaseServiceOptions } from '../../libs/lease/index.js';
import { compileLeaseUpkeepOptions } from '../../libs/runtime/index.js';
import { compileRunStoreOptions, RUN_EVENTS_CAP } from '../../libs/store/index.js';

describe('the lease upkeep options, compiled once', () => {
  it('take the ADR-0127 d5 windows and the data plane bound by default, frozen', () => {
    const compiled = compileLeaseUpkeepOptions();
    expect(compiled).toMatchObject({
      clock: Date.now,
      windowMs: ADR_0127.renewWindowMs,
      stepMs: ADR_0127.leaseStepMs,
      lifetimeMs: ADR_0127.leaseLifetimeMs,
      concurrency: 32,
      renewalBatchSize: 150,
    });
    expect(Object.isFrozen(compiled)).toBe(true);
    expect(compileLeaseUpkeepOptions(compiled)).toEqual(compiled);
  });

  it('refuse a window no renewal could reach past, a lifetime under one step, and a batch past the bound', () => {
    expect(() => compileLeaseUpkeepOptions({ windowMs: 15 * 60_000 })).toThrow(
      /windowMs: expected less than stepMs/,
    );
    expect(() => compileLeaseUpkeepOptions({ lifetimeMs: 60_000 })).toThrow(
      /lifetimeMs: expected at least stepMs/,
    );
    expect(() => compileLeaseUpkeepOptions({ renewalBatchSize: 151 })).toThrow(
      /renewalBatchSize: expected at most 150/,
    );
    expect(() => compileLeaseUpkeepOptions({ concurrency: 0 })).toThrow(
      /concurrency: expected a positive integer/,
    );
  });
});

describe('the lease service options, compiled once', () => {
  const given = {
    workerId: 'bw_1',
    pinnedProfiles: '*',
    sealKey: Buffer.alloc(32, 1),
  } as unknown as LeaseServiceOptions;

  it('take the ADR-0127 d5 caps and the wall clock by default, and build the seal keys once', () => {
    const compiled = compileLeaseServiceOptions(given);
    expect(compiled.caps).toEqual({ stepMs: ADR_0127.leaseStepMs, lifetimeMs: ADR_0127.leaseLifetimeMs });
    expect(compiled.clock).toBe(Date.now);
    expect(compiled.sealKeys).toBeDefined();
    expect(Object.isFrozen(compiled)).toBe(true);
  });

  it('refuse caps whose lifetime is shorter than one step, or not whole milliseconds', () => {
    expect(() =>
      compileLeaseServiceOptions({ ...given, caps: { stepMs: 60_000, lifetimeMs: 1_000 } }),
    ).toThrow(/caps.lifetimeMs: expected at least caps.stepMs/);
    expect(() => compileLeaseServiceOptions({ ...given, caps: { stepMs: 0.5, lifetimeMs: 1_000 } })).toThrow(
      /caps.stepMs: expected a positive integer/,
    );
  });
});

describe('the run store options, compiled once', () => {
  it('take the event cap, thirty days of retention and the wall clock by default', () => {
    expect(compileRunStoreOptions()).toEqual({
      clock: Date.now,
      eventsCap: RUN_EVENTS_CAP,
      retentionMs: 30 * 86_400_000,
    });
  });

  it('refuse an event cap or a retention that is not a positive whole number', () => {
    expect(() => compileRunStoreOptions({ eventsCap: 0 })).toThrow(/eventsCap/);
    expect(() => compileRunStoreOptions({ retentionMs: -1 })).toThrow(/retentionMs/);
  });
});
