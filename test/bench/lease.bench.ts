import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { decodeKey, loadConfig } from '../../libs/config/index.js';
import { DEFAULT_LEASE_CAPS, sealState } from '../../libs/lease/index.js';
import {
  idemKey,
  startTestBrowserWorker,
  TEST_SEAL_KEY,
  type TestBrowserWorker,
} from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { figure, percentile, report } from './report.js';

const WARM_DEFAULTS = loadConfig({}).browser;

const SUITE = 'lease';
const ROUNDS = 20;
const COLD_ROUNDS = 10;
const IDLE_LEASES = 50;

/**
 * Memory in MiB of every process descending from this one (the Chromium processes): proportional
 * set size, so pages shared between Chromium's processes are counted once, not once per process.
 */
function descendantsRssMb(rootPid: number): number {
  const parents = new Map<number, number>();
  const rssKb = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const status = readFileSync(`/proc/${entry}/status`, 'utf8');
      parents.set(Number(entry), Number(/^PPid:\s+(\d+)/m.exec(status)?.[1]));
      const rollup = readFileSync(`/proc/${entry}/smaps_rollup`, 'utf8');
      rssKb.set(Number(entry), Number(/^Pss:\s+(\d+)/m.exec(rollup)?.[1] ?? 0));
    } catch {
      // The process ended while we looked.
    }
  }
  let total = 0;
  for (const [pid] of parents) {
    let cursor: number | undefined = pid;
    while (cursor && cursor !== rootPid) cursor = parents.get(cursor);
    if (cursor === rootPid && pid !== rootPid) total += rssKb.get(pid) ?? 0;
  }
  return total / 1024;
}

/** Lets Chromium's processes that closed contexts go before memory is read. */
function settleMemory(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 1_000));
}

async function timed<T>(run: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await run();
  return [performance.now() - started, value];
}

/** Opens a context with `storageState` and its page, as a lease's is made without a pool. */
async function rawNewContextMs(worker: TestBrowserWorker, storageState: SealedCookieState): Promise<number> {
  const [ms, context] = await timed(async () => {
    const context = await worker.handle.browser.newContext({ storageState });
    await context.newPage();
    return context;
  });
  await context.close();
  return ms;
}

type SealedCookieState = Awaited<ReturnType<typeof sealedCookieState>>;

/** The storage state the bench profile is sealed with: a session cookie, as a logged-in profile has. */
async function sealedCookieState(worker: TestBrowserWorker) {
  const context = await worker.handle.browser.newContext();
  const state = await context.storageState();
  await context.close();
  return {
    ...state,
    cookies: [
      {
        name: 'session',
        value: 'x'.repeat(200),
        domain: 'example.com',
        path: '/',
        expires: -1,
        httpOnly: false,
        secure: false,
        sameSite: 'Lax' as const,
      },
    ],
  };
}

/** The data-plane calls the bench makes, on one worker. */
function leaseCalls(worker: TestBrowserWorker) {
  const scope = (runId: string) => ({
    tenant: 't1',
    principal: 'owner',
    run_id: runId,
    attempt: 1,
    requested_expires_at_ms: worker.clock.now() + 60 * 60_000,
  });
  const acquire = (profileId: string, runId: string) =>
    worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases`, {
      idempotencyKey: idemKey(),
      body: scope(runId),
    });
  const close = (profileId: string, leaseId: string, seal: boolean) =>
    worker.call('POST', `/v1/tenants/t1/profiles/${profileId}/leases/${leaseId}/close`, {
      idempotencyKey: idemKey(),
      body: { seal },
    });
  const createProfile = (id: string) =>
    worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id, tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
  /**
   * Gives the profile a sealed state (a session cookie), written as a lease's close writes it: a
   * lease published and closed with the sealed blob, in the store itself (no context is made).
   */
  const seal = async (profileId: string, state: SealedCookieState) => {
    const profile = { tenant: 't1', id: profileId };
    const leaseId = `lse_seed_${profileId}`;
    const now = worker.clock.now();
    const store = worker.handle.store;
    await store.acquire({
      profile,
      newLeaseId: leaseId,
      scope: { tenant: 't1', principal: 'owner', run_id: 'run_seed', attempt: 1 },
      providerRef: 'bw-seed',
      requestedExpiresAtMs: now + 60_000,
      nowMs: now,
      caps: DEFAULT_LEASE_CAPS,
    });
    await store.beginClose(profile, leaseId, now, 'closed');
    const blob = sealState(state, decodeKey(TEST_SEAL_KEY) as Buffer, `t1/${profileId}`);
    if (!(await store.finishClose(profile, leaseId, now, blob)).sealed) throw new Error('seed not sealed');
  };
  return { acquire, close, createProfile, seal };
}

/**
 * The cold side: a worker with no warm contexts (BROWSER_WARM_CONTEXTS=0), each acquire
 * making its context from the sealed state, beside a raw newContext + newPage measured between them.
 */
async function coldAcquires(prefix: string): Promise<{ coldMs: number[]; rawMs: number[] }> {
  const worker = await startTestBrowserWorker({
    prefix: `${prefix}-cold`,
    workerId: 'bw-bench-cold',
    env: { BROWSER_WARM_CONTEXTS: '0' },
  });
  const calls = leaseCalls(worker);
  try {
    const state = await sealedCookieState(worker);
    await calls.createProfile('bench');
    await calls.seal('bench', state);
    const coldMs: number[] = [];
    const rawMs: number[] = [];
    for (let round = 0; round < COLD_ROUNDS; round += 1) {
      rawMs.push(await rawNewContextMs(worker, state));
      const [acquired, answer] = await timed(() => calls.acquire('bench', `run_cold_${round}`));
      if (answer.status !== 201) throw new Error(`cold acquire answered ${answer.status}`);
      coldMs.push(acquired);
      await calls.close('bench', answer.body.lease_id, true);
    }
    return { coldMs, rawMs };
  } finally {
    await worker.handle.close();
  }
}

export default async function leaseBench(): Promise<void> {
  const prefix = uniquePrefix('bench-lease');
  const redis = new Redis(testRedisUrl());
  try {
    const cold = await coldAcquires(prefix);
    report(
      figure(SUITE, 'acquire_cold_p50_ms', percentile(cold.coldMs, 50), {
        metric: 'raw_new_context_p50_ms',
        value: percentile(cold.rawMs, 50),
      }),
    );
    await warmAcquires(prefix);
  } finally {
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  }
}

/**
 * The warm side: a worker with the default pool (BROWSER_WARM_CONTEXTS, BROWSER_WARM_POOL_MB).
 * Before each round the pool has settled (refilled after the last round's seal), so the raw
 * baseline and the acquire are measured on a quiet worker; each round closes with a seal, as a
 * run's end does, and the pool remakes its contexts from the new state.
 */
async function warmAcquires(prefix: string): Promise<void> {
  const worker = await startTestBrowserWorker({
    prefix,
    workerId: 'bw-bench',
    // The defaults (the test fixture turns the pool off unless asked).
    env: {
      BROWSER_WARM_CONTEXTS: String(WARM_DEFAULTS.warmContexts),
      BROWSER_WARM_POOL_MB: String(WARM_DEFAULTS.warmPoolMb),
    },
  });
  const pool = worker.handle.warmPool;
  if (!pool) throw new Error('the bench worker has no warm pool');
  const calls = leaseCalls(worker);
  try {
    const sealedState = await sealedCookieState(worker);
    await calls.createProfile('bench');
    await calls.seal('bench', sealedState);

    const acquireMs: number[] = [];
    const rawMs: number[] = [];
    const reattachMs: number[] = [];
    const renewMs: number[] = [];
    const closeSealMs: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      await pool.settled();
      rawMs.push(await rawNewContextMs(worker, sealedState));

      const [acquired, answer] = await timed(() => calls.acquire('bench', `run_${round}`));
      if (answer.status !== 201) throw new Error(`acquire answered ${answer.status}`);
      acquireMs.push(acquired);
      const lease = answer.body;
      // The acquire's refill makes a context in the background; reattach and renew do not depend
      // on the pool, so they are measured once it is done, as before there was a pool.
      await pool.settled();
      const [reattached] = await timed(() => calls.acquire('bench', `run_${round}`));
      reattachMs.push(reattached);
      const [renewed] = await timed(() =>
        worker.call('POST', `/v1/tenants/t1/profiles/bench/leases/${lease.lease_id}/renew`, {
          idempotencyKey: idemKey(),
          body: { requested_expires_at_ms: worker.clock.now() + 30 * 60_000 },
        }),
      );
      renewMs.push(renewed);
      const [closed] = await timed(() => calls.close('bench', lease.lease_id, true));
      closeSealMs.push(closed);
    }

    const rawP50 = percentile(rawMs, 50);
    report(
      figure(SUITE, 'acquire_p50_ms', percentile(acquireMs, 50), {
        metric: 'raw_new_context_p50_ms',
        value: rawP50,
      }),
    );
    report(
      figure(SUITE, 'acquire_p95_ms', percentile(acquireMs, 95), {
        metric: 'raw_new_context_p95_ms',
        value: percentile(rawMs, 95),
      }),
    );
    report(figure(SUITE, 'reattach_p50_ms', percentile(reattachMs, 50)));
    report(figure(SUITE, 'renew_p50_ms', percentile(renewMs, 50)));
    report(figure(SUITE, 'close_seal_p50_ms', percentile(closeSealMs, 50)));

    // The pool's own memory: the worker with its pool full, then with it emptied.
    await pool.settled();
    await settleMemory();
    const rssFull = descendantsRssMb(process.pid);
    await pool.drain();
    await settleMemory();
    const rssEmpty = descendantsRssMb(process.pid);
    report(figure(SUITE, 'warm_pool_mb', rssFull - rssEmpty));

    // Idle leases: one per profile, nothing loaded, the browser's RSS shared out among them. Their
    // acquires make the pool warm their profiles too; it is emptied before the measure, so what it
    // holds is counted in neither measure.
    for (let index = 0; index < IDLE_LEASES; index += 1) {
      await calls.createProfile(`idle${index}`);
      const answer = await calls.acquire(`idle${index}`, `run_idle_${index}`);
      if (answer.status !== 201) throw new Error(`idle acquire answered ${answer.status}`);
    }
    await pool.settled();
    await pool.drain();
    await settleMemory();
    const rssAfter = descendantsRssMb(process.pid);
    report(figure(SUITE, 'rss_per_lease_mb', (rssAfter - rssEmpty) / IDLE_LEASES));
  } finally {
    await worker.handle.close();
  }
}
