import type { ArtifactStore } from '../../artifacts/index.js';
import type { RunStatus } from '../../contracts/index.js';

/** How often the artifact sweep walks the store: a listing is a folder walk or a bucket listing. */
export const ARTIFACT_SWEEP_EVERY_MS = 10 * 60_000;

/** Runs whose records are read in one pipelined round trip. */
const ARTIFACT_SWEEP_BATCH = 100;

export interface ArtifactSweepDeps {
  artifacts: Pick<ArtifactStore, 'listRuns' | 'deleteRun'>;
  /** The run store's pipelined read: a run whose record is gone is absent from the map. */
  store: { runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus }>> };
  /** Between two walks, in ms. Default {@link ARTIFACT_SWEEP_EVERY_MS}. */
  everyMs?: number;
  now?: () => number;
}

/**
 * Retention: a run's Redis keys expire on their own a retention after its end, but its
 * artifacts sit in a folder or a bucket that knows nothing of Redis. Now and then (not every pass:
 * the walk lists every run the store holds) the sweeper deletes the artifacts of each run whose
 * record no longer exists. A run writes artifacts only while it runs, so its record exists then;
 * one that is gone expired with its retention (or was never more than an orphaned write).
 */
export class ArtifactSweep {
  readonly #deps: ArtifactSweepDeps;
  readonly #everyMs: number;
  readonly #now: () => number;
  #nextAtMs = 0;

  constructor(deps: ArtifactSweepDeps) {
    this.#deps = deps;
    this.#everyMs = deps.everyMs ?? ARTIFACT_SWEEP_EVERY_MS;
    if (!Number.isInteger(this.#everyMs) || this.#everyMs < 0)
      throw new RangeError(`everyMs: expected a whole number of ms, got ${this.#everyMs}`);
    this.#now = deps.now ?? Date.now;
  }

  /** Walks the store if a walk is due; answers the runs whose artifacts it deleted. */
  async sweepIfDue(): Promise<string[]> {
    if (this.#now() < this.#nextAtMs) return [];
    // Set first: a walk that fails is tried again at the next due time, not every pass.
    this.#nextAtMs = this.#now() + this.#everyMs;
    return this.sweep();
  }

  /** One walk over every run the artifact store holds. */
  async sweep(): Promise<string[]> {
    const deleted: string[] = [];
    let batch: Array<{ tenant: string; runId: string }> = [];
    for await (const run of this.#deps.artifacts.listRuns()) {
      batch.push(run);
      if (batch.length >= ARTIFACT_SWEEP_BATCH) {
        deleted.push(...(await this.#deleteGone(batch)));
        batch = [];
      }
    }
    if (batch.length > 0) deleted.push(...(await this.#deleteGone(batch)));
    return deleted;
  }

  async #deleteGone(batch: ReadonlyArray<{ tenant: string; runId: string }>): Promise<string[]> {
    const live = await this.#deps.store.runStates(batch.map((run) => run.runId));
    const gone = batch.filter((run) => !live.has(run.runId));
    for (const run of gone) await this.#deps.artifacts.deleteRun(run.tenant, run.runId);
    return gone.map((run) => run.runId);
  }
}
