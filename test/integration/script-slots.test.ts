import { readdirSync, readFileSync } from 'node:fs';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LeaderLock,
  McpSessionSlots,
  ProfileTurns,
  RedisLeaseStore,
  RunFileNotes,
  RunScreenshotNotes,
  RunStore,
  withScripts,
} from '../../libs/store/index.js';
import { RunTranscripts } from '../../libs/store/run-transcript.js';
import { ScheduleStore } from '../../libs/store/schedules.js';
import { withIncludes } from '../../libs/store/scripts.js';
import { WebhookStore } from '../../libs/store/webhooks.js';
import { closeRedis, connectRedis } from '../../queues/index.js';
import { createStoreProfile } from '../fixtures/lease-store.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { createTestSession, ran, TEST_RUN_LIMITS } from '../fixtures/run-store.js';

const TENANT = 'acme';
const CAPS = { stepMs: 15 * 60_000, lifetimeMs: 60 * 60_000 };

/**
 * The part of a key Redis Cluster hashes: the first `{…}` with something inside, else the whole
 * key. Two keys with the same hash tag are in the same slot.
 */
function hashTag(key: string): string {
  const open = key.indexOf('{');
  if (open === -1) return key;
  const close = key.indexOf('}', open + 1);
  return close === -1 || close === open + 1 ? key : key.slice(open + 1, close);
}

interface ScriptCall {
  script: string;
  keys: string[];
}

interface LoadedScript {
  numberOfKeys: number | null;
  execute(container: unknown, args: unknown[], options: unknown, callback: unknown): unknown;
}

/**
 * Records the KEYS of every script call made on `client`, direct or pipelined: both go through
 * the Script object ioredis keeps per command defined by `withScripts` (`scriptsSet`).
 */
function recordScriptCalls(client: Redis): ScriptCall[] {
  withScripts(client);
  const calls: ScriptCall[] = [];
  const scripts = (client as unknown as { scriptsSet: Record<string, LoadedScript> }).scriptsSet;
  // Not enumerable: the connection shares them with its pipelines (shareScriptsWithPipelines).
  for (const name of Object.getOwnPropertyNames(scripts)) {
    const script = scripts[name] as LoadedScript;
    const execute = script.execute.bind(script);
    script.execute = (container, args, options, callback) => {
      // A `+` script (it holds every key its run owns) takes its key count first.
      const keys =
        script.numberOfKeys === null
          ? args.slice(1, 1 + Number(args[0]))
          : args.slice(0, script.numberOfKeys);
      calls.push({ script: name, keys: keys.map(String) });
      return execute(container, args, options, callback);
    };
  }
  return calls;
}

describe('every store script touches one hash slot (the store works on a Redis Cluster)', () => {
  const prefix = `${uniquePrefix('script-slots')}:`;
  let redis: Redis;
  let calls: ScriptCall[];
  let nowMs = 1_800_000_000_000;

  beforeAll(async () => {
    redis = await connectRedis(testRedisUrl(), 'worker', 'test-script-slots');
    calls = recordScriptCalls(redis);
  });
  afterAll(async () => {
    await deletePrefixedKeys(redis, prefix.slice(0, -1));
    await closeRedis(redis);
  });

  it('runs every script with KEYS that share one hash tag', async () => {
    const store = new RunStore(redis, prefix, () => nowMs);
    const leases = new RedisLeaseStore(redis, prefix);
    const transcripts = new RunTranscripts(redis, prefix);
    const lock = new LeaderLock(redis, `${prefix}{sweeper}:lock`, 10_000);

    // Profiles and leases.
    const profile = { tenant: TENANT, id: 'shop' };
    await createStoreProfile(leases, profile, nowMs);
    await leases.claimIdempotency(profile, 'idem-1', 'hash');
    const scope = { tenant: TENANT, principal: 'alice', run_id: 'run_x', attempt: 1 };
    const acquired = await leases.acquire({
      profile,
      scope,
      newLeaseId: 'lse_1',
      providerRef: 'bw-1',
      requestedExpiresAtMs: nowMs + 60_000,
      nowMs,
      caps: CAPS,
    });
    if (acquired.status !== 'created') throw new Error(`acquire answered ${acquired.status}`);
    // Every renewal (alone or a batch's), each its own script call in its profile's slot.
    await leases.renewIdempotently(
      [
        {
          profile,
          leaseId: acquired.leaseId,
          requestedExpiresAtMs: nowMs + 180_000,
          idempotencyKey: 'idem-2',
          requestHash: 'hash-2',
        },
      ],
      nowMs,
      CAPS,
    );
    await leases.advanceSequence(profile, acquired.leaseId, 1, nowMs, true);
    await leases.noteEffect(profile, acquired.leaseId, 1, 'applied');
    await leases.advanceSequence(profile, acquired.leaseId, 2, nowMs, 'skip');
    await leases.beginClose(profile, acquired.leaseId, nowMs, 'closed');
    await leases.finishClose(profile, acquired.leaseId, nowMs, undefined);
    await leases.noteSealFault(profile, undefined);
    await leases.updateProfile(profile, { protected: true }, nowMs);
    const gone = { tenant: TENANT, id: 'gone' };
    await createStoreProfile(leases, gone, nowMs, 'https://gone.test');
    await leases.deleteProfile(gone);

    // A schedule's due time, decided once.
    await new ScheduleStore(redis, prefix, () => nowMs).decide('sch_x', {
      dueKey: '1',
      outcome: 'fired',
      missedBefore: 0,
    });

    // The sweeper's lock.
    await lock.tryHold();
    await lock.release();

    // Runs, from submission to every end.
    const sessionId = await createTestSession(store, TENANT, {
      instructions: 'act',
      browserProfileId: 'shop',
    });
    const submit = async () =>
      (
        await store.submitRun({
          tenant: TENANT,
          principal: 'alice',
          sessionId,
          input: { message: 'go' },
          limits: TEST_RUN_LIMITS,
          timeoutMs: 60_000,
        })
      ).run;
    const first = await submit();
    ran(await store.claimRun(first.id, 1, 'w1'));
    await store.addUsage(first.id, 'w1', { steps: 1 });
    await store.markUnverified(first.id, 'w1', {
      invocation_id: `${first.id}-a1-s0-i0`,
      code: 'provider_unavailable',
      message: 'gone',
    });
    await store.noteBrowserTools(first.id, 'w1', '1.3.0');
    await store.saveLoopState(first.id, 'w1', { calls: [] });
    await transcripts.append(first.id, 'w1', { kind: 'model', text: 'hi' });
    await store.appendEvent(first.id, 'w1', 'message', {});
    await store.recordInvocation(first.id, 'w1', {
      step: 0,
      index: 0,
      tool: 'browser.act',
      state: 'started',
    });
    // A step record and its event.
    await store.recordStep('w1', {
      id: 'a1-m1',
      run_id: first.id,
      attempt: 1,
      turn: 1,
      index: null,
      kind: 'model',
      status: 'started',
      started_at_ms: nowMs,
      ended_at_ms: null,
      duration_ms: null,
      model: null,
      tool: null,
    });
    const { approvalId } = await store.requestApproval(first.id, 'w1', {
      invocationId: `${first.id}-a1-s0-i0`,
      tool: 'browser.act',
      arguments: {},
    });
    await store.approve(TENANT, approvalId, 'alice', { duration_ms: 60_000, max_actions: 5 });
    ran(await store.claimRun(first.id, 2, 'w2'));
    await store.consumeGrant(first.id, 'w2', `${first.id}-a1-s0-i0`);
    ran(await store.waitRun(first.id, 'w2', 'waiting_user'));
    ran(await store.requeueRun(first.id, { expected: 'waiting_user' }));
    ran(await store.claimRun(first.id, 3, 'w3'));
    ran(await store.releaseRun(first.id, 'w3'));
    ran(await store.claimRun(first.id, 3, 'w4'));
    ran(await store.finishRun(first.id, 'w4', { status: 'succeeded', result: 'done' }));

    // A person on the page: a takeover asked of a running run, then let go.
    const taken = await submit();
    ran(await store.claimRun(taken.id, 1, 'w7'));
    await store.takeOverRun(taken.id, {
      tenant: TENANT,
      principal: 'alice',
      holder: 'principal:alice',
      untilMs: nowMs + 60_000,
      reason: 'taken over',
    });
    await store.releaseTakeover(taken.id, TENANT, 'alice', 'principal:alice');

    const second = await submit();
    ran(await store.cancelRun(TENANT, second.id));
    const third = await submit();
    ran(await store.failRun(third.id, 'deadline_exceeded'));
    ran(await store.retryRun(TENANT, third.id));
    await store.expireStaleApprovals(third.id);
    await store.moveRunDeadline(third.id, 0, nowMs);
    nowMs += 1;

    // A profile's line: the holder goes, the next waits, the holder passes and wakes it.
    const turns = new ProfileTurns(redis, prefix, () => nowMs);
    const [holder, waiter] = [await submit(), await submit()];
    ran(await store.claimRun(holder.id, 1, 'w5'));
    await turns.take(profile, holder.id);
    ran(await store.claimRun(waiter.id, 1, 'w6'));
    const behind = await turns.take(profile, waiter.id);
    if (behind.turn) throw new Error('the waiter was first');
    expect((await turns.waitForProfile(waiter.id, 'w6', behind)).ok).toBe(true);
    await turns.pass(profile, holder.id);
    ran(await turns.wake(waiter.id));

    // A tenant's webhook, registered under its cap.
    const hooks = new WebhookStore(redis, prefix, () => nowMs);
    expect(await hooks.create({ tenant: TENANT, url: 'https://hooks.example.com/leasehold' })).toBeDefined();

    // An MCP session's place in its tenant's and key's counts.
    const places = new McpSessionSlots(
      redis,
      prefix,
      { perTenant: 2, perKey: 1, ttlMs: 60_000 },
      () => nowMs,
    );
    expect(await places.take({ sessionId: 'mcp-1', tenant: TENANT, keyId: 'key_1' })).toEqual({
      taken: true,
    });

    // A key made by another key, under the tenant's cap.
    const maker = await store.createApiKey({ tenant: TENANT, principal: 'ops', scopes: ['admin'] });
    const made = await store.createApiKeyBy(maker.identity, { principal: 'ops', scopes: ['runs:read'] }, 10);
    expect(made.ok).toBe(true);

    // A screenshot named in an answer, then stored, beside its run.
    const shots = new RunScreenshotNotes(redis, prefix);
    const shotRun = await submit();
    expect(await shots.pending(shotRun.id, 'shot-1.jpg')).toBe(true);
    await shots.settled(shotRun.id, 'shot-1.jpg', { state: 'stored', reason: null });

    // A download counted against its run's limit, then noted beside it.
    const files = new RunFileNotes(redis, prefix);
    const fileId = 'fil_0123456789abcdefghjk';
    expect(await files.reserve(shotRun.id, fileId, 10, 100)).toBe(true);
    expect(await files.reserve(shotRun.id, fileId, 100, 100)).toBe(false);
    await files.note(shotRun.id, {
      id: fileId,
      name: 'orders.csv',
      content_type: 'text/csv',
      size_bytes: 10,
      sha256: 'a'.repeat(64),
      state: 'stored',
      reason: null,
      created_at_ms: nowMs,
    });
    expect(await store.listRunFiles(shotRun.id)).toEqual([expect.objectContaining({ id: fileId })]);
    expect(await files.keptBytes(shotRun.id)).toBe(10);

    // An upload held by the run that lists it; a holder that is gone let go of (one is left).
    const upload = await store.uploads.create({
      id: 'fil_upload0123456789abc',
      tenant: TENANT,
      principal: 'alice',
      name: 'receipt.pdf',
      content_type: 'application/pdf',
      size_bytes: 1,
      sha256: 'b'.repeat(64),
      created_at_ms: nowMs,
    });
    await store.uploads.hold(TENANT, shotRun.id, [upload.id]);
    expect(await store.uploads.release(upload.id, ['run_gone0123456789'])).toBe(1);

    const split = calls.filter((call) => new Set(call.keys.map(hashTag)).size > 1);
    expect(split).toEqual([]);

    const called = new Set(calls.map((call) => call.script));
    const scripts = readdirSync(new URL('../../libs/store/lua/', import.meta.url))
      .map((file) => /^([A-Za-z]+)-\d+\+?\.lua$/.exec(file)?.[1])
      .filter((name): name is string => name !== undefined);
    expect(scripts.filter((name) => !called.has(name))).toEqual([]);
  });

  it('builds no key inside a script but from one of its KEYS, so it stays in their slot', () => {
    const dir = new URL('../../libs/store/lua/', import.meta.url);
    /** Commands whose first argument is not a key: a plain channel, or none. */
    const keyless = new Set(['PUBLISH', 'TIME']);
    /** A key name made from a declared key: that key itself, or a name it begins (its hash tag first). */
    const fromKeys = (expression: string) =>
      /^(?:KEYS\[\w+\]|string\.sub\(KEYS\[\w+\])/.test(expression.trim());
    const problems: string[] = [];
    for (const file of readdirSync(dir).filter((name) => name.endsWith('.lua'))) {
      const source = withIncludes(readFileSync(new URL(file, dir), 'utf8'));
      for (const [, command, first] of source.matchAll(/redis\.p?call\("([A-Z]+)",\s*([^,)]+)/g)) {
        if (!command || !first || keyless.has(command) || fromKeys(first)) continue;
        const name = first.trim();
        // A local made from a declared key, or a parameter every caller passes a declared key.
        const local = new RegExp(`local ${name} = (.+)`).exec(source)?.[1];
        const fn = new RegExp(`function (\\w+)\\(([^)]*)\\b${name}\\b`).exec(source);
        const position = fn?.[2]?.split(',').length;
        const callers = fn?.[1]
          ? [...source.matchAll(new RegExp(`(?<!function )\\b${fn[1]}\\(([^)]*)\\)`, 'g'))].map(
              (call) => call[1]?.split(',')[(position ?? 1) - 1] ?? '',
            )
          : [];
        const ok = local ? fromKeys(local) : callers.length > 0 && callers.every(fromKeys);
        if (!ok) problems.push(`${file}: ${command} ${name}`);
      }
    }
    expect(problems).toEqual([]);
  });
});
