import type { ProfileRef } from '../contracts/index.js';
import { DataPlaneClient } from '../provider/index.js';

/** What releasing a run's lease reads: the profile's live lease and the browser workers. */
export interface LeaseReleaseDeps {
  leases: {
    liveLeaseId(profile: ProfileRef): Promise<string | undefined>;
    getLease(
      profile: ProfileRef,
      leaseId: string,
    ): Promise<{ providerRef: string; scope: { run_id: string; attempt: number } } | undefined>;
  };
  workers: { list(): Promise<Array<{ id: string; url: string }>> };
  dataPlaneToken: string;
}

/**
 * Closes the live lease a run holds on its profile, if any — sealed, since the run is done with the
 * page (ADR-0127 d4, d6). Used where an execution's own end does not reach: a cancel of a run
 * that is not running, and the sweeper's reclaim. A lease of another run is left alone, and so is
 * one of another attempt of this run: the follow-up of attempt 1's end may come after a retry's
 * attempt 2 acquired its own page (CI saw attempt 2 fail `lease_expired` there).
 */
export async function releaseRunLease(
  deps: LeaseReleaseDeps,
  run: { id: string; tenant: string; attempt: number; browser_profile_id: string | null },
  { seal = true }: { seal?: boolean } = {},
): Promise<'closed' | 'none'> {
  if (!run.browser_profile_id) return 'none';
  // A session's profile id names a profile of the run's own tenant (DESIGN §3).
  const profile: ProfileRef = { tenant: run.tenant, id: run.browser_profile_id };
  const leaseId = await deps.leases.liveLeaseId(profile);
  if (!leaseId) return 'none';
  const lease = await deps.leases.getLease(profile, leaseId);
  if (!lease || lease.scope.run_id !== run.id || lease.scope.attempt !== run.attempt) return 'none';
  const worker = (await deps.workers.list()).find((candidate) => candidate.id === lease.providerRef);
  // A worker that is gone took the page with it; its restart revokes the lease, or it expires.
  if (!worker) return 'none';
  const client = new DataPlaneClient({ baseUrl: worker.url, token: deps.dataPlaneToken });
  await client.close(profile, leaseId, { seal }, { deadlineMs: Date.now() + 15_000 });
  return 'closed';
}
