/**
 * A run's page handed to a person and back, through the data plane's person control on the run's
 * live lease (the holder is `principal:<id>`). The API (a parked run taken over), the run worker
 * (a running run pausing at its safe point) and the sweeper (a takeover whose time is up) all use
 * it; none of them needs to hold the lease: the run's live lease is found by its profile.
 */
export interface RunPageControl {
  /** The URL of the run's live page now (the one a person is given), or null where it cannot be read. */
  currentUrl(run: RunPageRef): Promise<string | null>;
  /**
   * Hands the run's live page to `holder` for `seconds`: from now on the run's own page calls are
   * refused before dispatch. Undefined when the run has no live page to hand over.
   */
  start(
    run: RunPageRef,
    holder: string,
    seconds: number,
  ): Promise<{ sinceMs: number; untilMs: number } | undefined>;
  /**
   * Ends `holder`'s control: what they did (how many inputs, the URL now), never what they typed.
   * Undefined when they no longer held it (its time ran out on the data plane, or the page is gone).
   */
  end(
    run: RunPageRef,
    holder: string,
  ): Promise<{ endedAtMs: number; inputs: number; url: string } | undefined>;
}

export interface RunPageRef {
  id: string;
  tenant: string;
  browser_profile_id: string | null;
}
