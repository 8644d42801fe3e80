import { ADR_0127 } from '../config/index.js';
import {
  MAX_RENEWALS_PER_REQUEST,
  type ProfileRef,
  type RunStatus,
  runNeedsPage,
} from '../contracts/index.js';
import { DataPlaneClient } from '../provider/index.js';
import { isSignInId } from '../store/index.js';

/** ADR-0127 d5–d6: renew within five minutes of expiry, 15 minutes a step, 60 minutes a lease. */
export const LEASE_UPKEEP_DEFAULTS = Object.freeze({
  windowMs: ADR_0127.renewWindowMs,
  stepMs: ADR_0127.leaseStepMs,
  lifetimeMs: ADR_0127.leaseLifetimeMs,
  concurrency: 32,
  renewalBatchSize: MAX_RENEWALS_PER_REQUEST,
});

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

export interface LeaseUpkeepDeps {
  leases: { listLiveLeases(): Promise<UpkeepLease[]> };
  /** Each run's status and deadline, in one read for many; a run missing from the map is gone. */
  runs: {
    runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus; deadlineAtMs: number }>>;
  };
  workers: { list(): Promise<Array<{ id: string; url: string }>> };
  dataPlaneToken: string;
  clock?: () => number;
  /** A lease expiring within this is renewed. Default 5 minutes. */
  windowMs?: number;
  /** The most one renewal may add past now. Default 15 minutes (the service's cap). */
  stepMs?: number;
  /** A lease never lives past this after it was acquired. Default 60 minutes (the service's cap). */
  lifetimeMs?: number;
  /** Data-plane calls in flight at once. Default 32. */
  concurrency?: number;
  /**
   * Renewals sent to one browser worker in one request. Default and most: 150, the data
   * plane's bound; smaller only makes more requests.
   */
  renewalBatchSize?: number;
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
  const now = (deps.clock ?? Date.now)();
  const windows = {
    windowMs: deps.windowMs ?? LEASE_UPKEEP_DEFAULTS.windowMs,
    stepMs: deps.stepMs ?? LEASE_UPKEEP_DEFAULTS.stepMs,
    lifetimeMs: deps.lifetimeMs ?? LEASE_UPKEEP_DEFAULTS.lifetimeMs,
  };
  const batchSize = Math.min(
    MAX_RENEWALS_PER_REQUEST,
    Math.max(1, deps.renewalBatchSize ?? LEASE_UPKEEP_DEFAULTS.renewalBatchSize),
  );
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
          await client.close(lease.profile, lease.id, { seal: true }, callLimits());
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
            callLimits(),
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
  await inLanes(work, deps.concurrency ?? LEASE_UPKEEP_DEFAULTS.concurrency, fail);
  return pass;
}

/** One data-plane call of a pass: a close, or a batch of renewals; its leases fail if it throws. */
interface UpkeepTask {
  leases: UpkeepLease[];
  run: () => Promise<void>;
}

/** Each data-plane call's own deadline, from when it starts (not when the pass was planned). */
function callLimits(): { deadlineMs: number } {
  return { deadlineMs: Date.now() + 15_000 };
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
