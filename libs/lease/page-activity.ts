const DEFAULT_QUIET_MS = 250;
const POLL_MS = 50;

/**
 * Whether this browser worker's pages are busy. The warm pool makes its contexts only
 * once no lease's page call has been under way for a moment, so making them never competes with a
 * live page for the machine's cores (with four a profile made eagerly, a 2-core machine starved
 * live pages until test/chaos/fifty-runs stranded runs). Under steady page calls the pool stays
 * as it is and acquires make their own contexts, as with no pool.
 */
export class PageActivity {
  #inFlight = 0;
  #lastEndMs = Number.NEGATIVE_INFINITY;

  /** `quietMs`: how long no page call must have run before the pool may make a context. */
  constructor(
    readonly quietMs = DEFAULT_QUIET_MS,
    private readonly clock: () => number = () => performance.now(),
  ) {}

  /** Counts `work` as a page call under way until it settles. */
  async track<T>(work: Promise<T>): Promise<T> {
    this.#inFlight += 1;
    try {
      return await work;
    } finally {
      this.#inFlight -= 1;
      this.#lastEndMs = this.clock();
    }
  }

  /** True when no page call is under way and none ended within `quietMs`. */
  isQuiet(): boolean {
    return this.#inFlight === 0 && this.clock() - this.#lastEndMs >= this.quietMs;
  }

  /** Resolves once the pages are quiet, or at once when `stopped()` turns true (looked at every poll). */
  async whenQuiet(stopped: () => boolean): Promise<void> {
    while (!this.isQuiet() && !stopped()) await new Promise((resolve) => setTimeout(resolve, POLL_MS));
  }
}
