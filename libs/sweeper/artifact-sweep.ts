import { type ArtifactStore, isUploadFolder } from '../artifacts/index.js';
import { isScheduleId, type RunStatus } from '../contracts/index.js';
import type { ScheduleStore, UploadStore } from '../store/index.js';

/** How often the artifact sweep walks the store: a listing is a folder walk or a bucket listing. */
export const ARTIFACT_SWEEP_EVERY_MS = 10 * 60_000;

/** Runs whose records are read in one pipelined round trip. */
const ARTIFACT_SWEEP_BATCH = 100;

export interface ArtifactSweepDeps {
  artifacts: Pick<ArtifactStore, 'listRuns' | 'deleteRun'>;
  /**
   * The run store's pipelined read (a run whose record is gone is absent from the map) and its
   * uploads: an upload's folder is the upload's, not a run's.
   */
  store: {
    runStates(runIds: readonly string[]): Promise<Map<string, { status: RunStatus }>>;
    uploads: Pick<UploadStore, 'holders' | 'release'>;
  };
  /**
   * A schedule that lists an upload holds it as a run does, while it exists. Without this, no
   * schedule's hold is ever let go (the upload then outlives the schedule, never the other way).
   */
  schedules?: Pick<ScheduleStore, 'existing'>;
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
 *
 * An upload's folder (DESIGN §12) is kept while its record is: the walk lets go of the runs that
 * held it and are gone (its record then expires 7 days after it was made, at once past that), and
 * deletes the bytes of an upload whose record is gone.
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

  /** Walks the store if a walk is due; answers the runs (and uploads) whose artifacts it deleted. */
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
    const runs = batch.filter((folder) => !isUploadFolder(folder.runId));
    const uploads = batch.filter((folder) => isUploadFolder(folder.runId));
    const live = await this.#deps.store.runStates(runs.map((run) => run.runId));
    const gone = runs.filter((run) => !live.has(run.runId));
    for (const run of gone) await this.#deps.artifacts.deleteRun(run.tenant, run.runId);
    const goneUploads = await this.#goneUploads(uploads.map((upload) => upload.runId));
    const deleted = uploads.filter((upload) => goneUploads.has(upload.runId));
    for (const upload of deleted) await this.#deps.artifacts.deleteRun(upload.tenant, upload.runId);
    return [...gone, ...deleted].map((folder) => folder.runId);
  }

  /** The uploads among `fileIds` whose records are gone, after letting go of holders that are gone. */
  async #goneUploads(fileIds: readonly string[]): Promise<Set<string>> {
    const gone = new Set<string>();
    if (fileIds.length === 0) return gone;
    const uploads = this.#deps.store.uploads;
    const holders = await uploads.holders(fileIds);
    const named = [...new Set([...holders.values()].flatMap((holderIds) => holderIds ?? []))];
    const runIds = named.filter((id) => !isScheduleId(id));
    const scheduleIds = named.filter(isScheduleId);
    const liveRuns = runIds.length > 0 ? await this.#deps.store.runStates(runIds) : new Map();
    const schedules = this.#deps.schedules;
    const liveSchedules = schedules ? await schedules.existing(scheduleIds) : new Set(scheduleIds);
    const held = (id: string) => (isScheduleId(id) ? liveSchedules.has(id) : liveRuns.has(id));
    for (const [fileId, holderIds] of holders) {
      if (holderIds === undefined) {
        gone.add(fileId);
        continue;
      }
      const goneRuns = holderIds.filter((id) => !held(id));
      // Unheld, it expires on its own; held by live runs only, it stays.
      if (goneRuns.length === 0) continue;
      if ((await uploads.release(fileId, goneRuns)) < 0) gone.add(fileId);
    }
    return gone;
  }
}
