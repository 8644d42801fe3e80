import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { idemKey, startTestBrowserWorker, type TestBrowserWorker } from '../fixtures/browser-worker.js';
import { deletePrefixedKeys, testRedisUrl, uniquePrefix } from '../fixtures/redis.js';
import { figure, percentile, report } from './report.js';

const SUITE = 'lease';
const ROUNDS = 40;
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

async function timed<T>(run: () => Promise<T>): Promise<[number, T]> {
  const started = performance.now();
  const value = await run();
  return [performance.now() - started, value];
}

export default async function leaseBench(): Promise<void> {
  const prefix = uniquePrefix('bench-lease');
  const worker: TestBrowserWorker = await startTestBrowserWorker({ prefix, workerId: 'bw-bench' });
  const redis = new Redis(testRedisUrl());
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

  try {
    await worker.call('POST', '/v1/tenants/t1/profiles', {
      body: { id: 'bench', tenant: 't1', principal: 'owner', allowed_origins: ['https://example.com'] },
    });
    // Give the profile a sealed state (a cookie and an origin's storage), as a logged-in profile has.
    const seeded = (await acquire('bench', 'run_seed')).body;
    await worker.handle.browser
      .contexts()
      .at(-1)
      ?.addCookies([{ name: 'session', value: 'x'.repeat(200), domain: 'example.com', path: '/' }]);
    await close('bench', seeded.lease_id, true);
    const sealedState = await worker.handle.browser.newContext().then(async (context) => {
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
    });

    const acquireMs: number[] = [];
    const rawMs: number[] = [];
    const reattachMs: number[] = [];
    const renewMs: number[] = [];
    const closeSealMs: number[] = [];
    for (let round = 0; round < ROUNDS; round += 1) {
      const [raw] = await timed(async () => {
        const context = await worker.handle.browser.newContext({ storageState: sealedState });
        await context.newPage();
        return context;
      }).then(async ([ms, context]) => {
        await context.close();
        return [ms] as const;
      });
      rawMs.push(raw);

      const [acquired, answer] = await timed(() => acquire('bench', `run_${round}`));
      if (answer.status !== 201) throw new Error(`acquire answered ${answer.status}`);
      acquireMs.push(acquired);
      const lease = answer.body;
      const [reattached] = await timed(() => acquire('bench', `run_${round}`));
      reattachMs.push(reattached);
      const [renewed] = await timed(() =>
        worker.call('POST', `/v1/tenants/t1/profiles/bench/leases/${lease.lease_id}/renew`, {
          idempotencyKey: idemKey(),
          body: { requested_expires_at_ms: worker.clock.now() + 30 * 60_000 },
        }),
      );
      renewMs.push(renewed);
      const [closed] = await timed(() => close('bench', lease.lease_id, true));
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

    // Idle leases: one per profile, nothing loaded, the browser's RSS shared out among them.
    const rssBefore = descendantsRssMb(process.pid);
    for (let index = 0; index < IDLE_LEASES; index += 1) {
      await worker.call('POST', '/v1/tenants/t1/profiles', {
        body: {
          id: `idle${index}`,
          tenant: 't1',
          principal: 'owner',
          allowed_origins: ['https://example.com'],
        },
      });
      const answer = await acquire(`idle${index}`, `run_idle_${index}`);
      if (answer.status !== 201) throw new Error(`idle acquire answered ${answer.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const rssAfter = descendantsRssMb(process.pid);
    report(figure(SUITE, 'rss_per_lease_mb', (rssAfter - rssBefore) / IDLE_LEASES));
  } finally {
    await worker.handle.close();
    await deletePrefixedKeys(redis, prefix);
    redis.disconnect();
  }
}
