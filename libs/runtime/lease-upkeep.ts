import { type ProfileRef, type RunStatus, runNeedsPage } from '../contracts/index.js';
import { DataPlaneClient } from '../provider/index.js';
import { isSignInId } from '../store/index.js';
import { compileLeaseUpkeepOptions, type LeaseUpkeepOptions } from './lease-upkeep-options.js';

export { LEASE_UPKEEP_DEFAULTS } from './lease-upkeep-options.js';

/** A live lease as the upkeep reads it from the lease store. */
export interface UpkeepLease {
  id: string;
  /** The profile leased: its tenant and its id within the tenant. */
  profile: ProfileRef;
  providerRef: string;
  scope: { run_id: string };
  acquiredAtMs: number;
  expiresAtMs: number;
}

/** What a pass reads and writes through, beside its options (compiled by {@link compileLeaseUpkeepOptions}). */
export interface LeaseUpkeepDeps extends LeaseUpkeepOptions {
  leases: { listLiveLeases(): Promise<UpkeepLease[]> };
  /** Each run's status and deadline, in one read for many; a run missing from the map is gone. */
  runs: {
    runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus; deadlineAtMs: number }>>;
  };
  workers: { list(): Promise<Array<{ id: string; url: string }>> };
  dataPlaneToken: string;
  onError?: (lease: UpkeepLease, error: unknown) => void;
}

export interface UpkeepPass {
  renewed: string[];
  closed: string[];
  /** Leases whose run still needs them and that are not due yet, or already at their last expiry. */
  kept: number;
  failed: string[];
}

/**
 * The expiry a due lease is renewed to, or undefined when it cannot go further: one step past its
 * current expiry less the window (so never more than a step past now), never past its lifetime
 * or its run's deadline. Deterministic from the lease and run alone, so two run workers passing
 * at once ask for the same expiry (one idempotency key: one renewal).
 */
export function renewalTarget(
  lease: Pick<UpkeepLease, 'acquiredAtMs' | 'expiresAtMs'>,
  runDeadlineAtMs: number,
  nowMs: number,
  { windowMs, stepMs, lifetimeMs }: { windowMs: number; stepMs: number; lifetimeMs: number },
): number | undefined {
  if (lease.expiresAtMs - nowMs > windowMs) return undefined;
  const target = Math.min(
    Math.max(lease.expiresAtMs, nowMs) + stepMs - windowMs,
    lease.acquiredAtMs + lifetimeMs,
    runDeadlineAtMs,
  );
  return target > lease.expiresAtMs ? target : undefined;
}

/**
 * One upkeep pass (ADR-0127 d5–d6), beside each run worker's claim loop: every live lease whose run
 * still needs it and that expires within the window is renewed; a lease whose run is done with the
 * page is sealed and closed. Reads are three pipelined round trips for the leases and one for the
 * runs, whatever their number. Renewals go to each lease's worker in batches (one
 * `POST /v1/renewals` per worker per batch of up to 150, each renewal under the key its single renew
 * would carry); each close is one data-plane call. A renewal its batch refuses fails alone, with the
 * error the single renew would have thrown; a batch that gets no answer fails each of its leases.
 */
export async function runLeaseUpkeep(deps: LeaseUpkeepDeps): Promise<UpkeepPass> {
  const { clock, concurrency, renewalBatchSize: batchSize, ...windows } = compileLeaseUpkeepOptions(deps);
  const now = clock();
  const pass: UpkeepPass = { renewed: [], closed: [], kept: 0, failed: [] };
  const leases = (await deps.leases.listLiveLeases()).filter((lease) => lease.expiresAtMs > now);
  if (leases.length === 0) return pass;
  const runs = await deps.runs.runStates([...new Set(leases.map((lease) => lease.scope.run_id))]);
  const clients = new Map(
    (await deps.workers.list()).map((worker) => [
      worker.id,
      new DataPlaneClient({ baseUrl: worker.url, token: deps.dataPlaneToken }),
    ]),
  );
  const fail = (lease: UpkeepLease, error: unknown) => {
    pass.failed.push(lease.id);
    deps.onError?.(lease, error);
  };

  const work: UpkeepTask[] = [];
  /** Due renewals by the worker that serves them, each with the expiry it is renewed to. */
  const due = new Map<string, Array<{ lease: UpkeepLease; target: number }>>();
  for (const lease of leases) {
    const client = clients.get(lease.providerRef);
    // A worker that is gone took the page with it; its restart revokes the lease, or it expires.
    if (!client) continue;
    // A person's sign-in is renewed by its own page's heartbeat; left alone, it expires unsealed.
    if (isSignInId(lease.scope.run_id)) continue;
    const run = runs.get(lease.scope.run_id);
    if (!runNeedsPage(run?.status)) {
      work.push({
        leases: [lease],
        run: async () => {
          // Each call's deadline the client sets from when it starts (DEFAULT_LEASE_CALL_TIMEOUT_MS).
          await client.close(lease.profile, lease.id, { seal: true });
          pass.closed.push(lease.id);
        },
      });
      continue;
    }
    const target = renewalTarget(lease, run?.deadlineAtMs ?? now, now, windows);
    if (target === undefined) {
      pass.kept += 1;
      continue;
    }
    const ofWorker = due.get(lease.providerRef) ?? [];
    ofWorker.push({ lease, target });
    due.set(lease.providerRef, ofWorker);
  }
  for (const [workerId, renewals] of due) {
    const client = clients.get(workerId) as DataPlaneClient;
    for (let start = 0; start < renewals.length; start += batchSize) {
      const batch = renewals.slice(start, start + batchSize);
      work.push({
        leases: batch.map(({ lease }) => lease),
        run: async () => {
          const results = await client.renewMany(
            batch.map(({ lease, target }) => ({
              profile: lease.profile,
              leaseId: lease.id,
              requestedExpiresAtMs: target,
            })),
          );
          for (const [index, result] of results.entries()) {
            const { lease } = batch[index] as { lease: UpkeepLease };
            if (result.error) fail(lease, result.error);
            else pass.renewed.push(lease.id);
          }
        },
      });
    }
  }
  await inLanes(work, concurrency, fail);
  return pass;
}

/** One data-plane call of a pass: a close, or a batch of renewals; its leases fail if it throws. */
interface UpkeepTask {
  leases: UpkeepLease[];
  run: () => Promise<void>;
}

/** Runs `tasks` with at most `limit` in flight; a failure fails that task's leases and the rest go on. */
async function inLanes(
  tasks: readonly UpkeepTask[],
  limit: number,
  onFailure: (lease: UpkeepLease, error: unknown) => void,
): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < tasks.length) {
      const task = tasks[next];
      next += 1;
      if (task)
        await task.run().catch((error: unknown) => {
          for (const lease of task.leases) onFailure(lease, error);
        });
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, tasks.length) }, lane));
}
