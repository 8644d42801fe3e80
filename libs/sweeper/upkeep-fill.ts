import {
  isSignInId,
  type LeaseUpkeepIndex,
  type RedisLeaseStore,
  type RunWorkerRoster,
} from '../store/index.js';

export interface UpkeepFillDeps {
  roster: Pick<RunWorkerRoster, 'members'>;
  index: Pick<LeaseUpkeepIndex, 'add' | 'unindexed' | 'filled' | 'markFilled'>;
  leases: Pick<RedisLeaseStore, 'listLiveLeases'>;
}

export type UpkeepFill =
  /** The fill was done by an earlier pass: nothing read. */
  | { status: 'already_filled' }
  /** No run worker is alive to take the leases: nothing read, tried again next pass. */
  | { status: 'no_worker' }
  /** Every unindexed live lease went to a live worker's index (none, when all were indexed). */
  | { status: 'filled'; adopted: Array<{ leaseId: string; runId: string; to: string }> };

/** Adds at once: the fill's writes are one round trip each, and a fleet may hold thousands. */
const ADD_LANES = 50;

/**
 * ADR-0127 d6: a lease acquired before run workers kept an index of their own is in no worker's,
 * so nobody renews it and its run loses its page when it expires. Once per fleet, the sweeper reads
 * every live lease, and each one that no worker's index holds goes into a live run worker's,
 * spread over the live ones in turn; that worker's upkeep then renews it or, if its run is done
 * with the page, closes it. A marker then stops every later pass, on any sweeper replica, from
 * reading the fleet's leases again. With no run worker alive nothing is adopted and no marker set,
 * and a pass that throws sets none either: the next pass tries again, and a lease adopted before
 * the throw is indexed by then, so it is not adopted twice. A lease a run worker acquires between
 * this read and its own `add` may land in two indexes: both renew it under one idempotency key,
 * which is one renewal.
 */
export async function adoptUnindexedLeases(deps: UpkeepFillDeps): Promise<UpkeepFill> {
  if (await deps.index.filled()) return { status: 'already_filled' };
  const { live } = await deps.roster.members();
  if (live.length === 0) return { status: 'no_worker' };
  // A person's sign-in is renewed by its own page's heartbeat and has no run: it stays out.
  const leases = (await deps.leases.listLiveLeases()).filter((lease) => !isSignInId(lease.scope.run_id));
  const orphans = await deps.index.unindexed(leases);
  const adopted = orphans.map((lease, turn) => ({
    leaseId: lease.id,
    runId: lease.scope.run_id,
    to: live[turn % live.length] as string,
    profile: lease.profile,
  }));
  for (let start = 0; start < adopted.length; start += ADD_LANES)
    await Promise.all(
      adopted
        .slice(start, start + ADD_LANES)
        .map(({ to, runId, profile, leaseId }) => deps.index.add(to, runId, { profile, leaseId })),
    );
  await deps.index.markFilled();
  return { status: 'filled', adopted: adopted.map(({ leaseId, runId, to }) => ({ leaseId, runId, to })) };
}
