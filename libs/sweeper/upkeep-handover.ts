import type { LeaseUpkeepIndex, RunWorkerRoster } from '../store/index.js';

export interface UpkeepHandoverDeps {
  roster: Pick<RunWorkerRoster, 'members' | 'forget'>;
  index: Pick<LeaseUpkeepIndex, 'moveAll'>;
}

export interface UpkeepHandover {
  /** Leases moved, by the gone worker they came from and the live one they went to. */
  moved: Array<{ from: string; to: string; leases: number }>;
  /** Gone workers whose leases stay where they are: no run worker is alive to take them. */
  stranded: string[];
}

/**
 * ADR-0127 d6: the leases a run worker kept up outlive it only if another run worker takes them
 * on. Each gone worker's index (its heartbeat lapsed) moves whole into a live run worker's, spread
 * over the live ones in turn, once a pass; the sweeper renews nothing itself (the maintenance role
 * holds no leases). With no run worker alive the leases are left: they expire at most fifteen
 * minutes after their last renewal, and their runs reattach or acquire afresh when they resume.
 */
export async function handOverOrphanedLeases(deps: UpkeepHandoverDeps): Promise<UpkeepHandover> {
  const { live, gone } = await deps.roster.members();
  const handover: UpkeepHandover = { moved: [], stranded: [] };
  if (gone.length === 0) return handover;
  if (live.length === 0) {
    handover.stranded.push(...gone);
    return handover;
  }
  for (const [turn, from] of gone.entries()) {
    const to = live[turn % live.length] as string;
    const leases = await deps.index.moveAll(from, to);
    // Forgotten only once its index is empty: a move that failed is tried again next pass.
    await deps.roster.forget(from);
    if (leases > 0) handover.moved.push({ from, to, leases });
  }
  return handover;
}
