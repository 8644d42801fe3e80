import { type ScreencastFrame, TabScreencast } from '../browser/index.js';
import type { LiveDialog, LiveEvent, LivePerson } from '../contracts/index.js';
import type { PageSession } from './pages.js';

/** How often a watched page is checked for navigations the origin fence refused. */
const BLOCKED_CHECK_MS = 500;

/**
 * One viewer of the live view: told each event it should show. A viewer that cannot keep up keeps
 * only the newest frame (its own business: see the data plane's stream); `end` is told once, when
 * the lease's page goes away.
 */
export interface LiveViewer {
  send(event: LiveEvent): void;
  end(): void;
}

/**
 * The live view of one lease's page: its viewers, and the screencast of the current tab that runs
 * only while at least one watches (started for the first, stopped after the last), so a page
 * nobody watches costs nothing. Frames are handed to every viewer and never kept.
 */
export class LiveFeed {
  readonly #viewers = new Set<LiveViewer>();
  #cast: TabScreencast | undefined;
  #stopping: Promise<void> = Promise.resolve();
  #blockedTimer: NodeJS.Timeout | undefined;
  #blockedSeen: { navigation: number; popup: number } | undefined;
  #unwatchDialogs: (() => void) | undefined;
  /** The dialog last told to the viewers (its JSON), so a change is told once. */
  #dialogTold = 'null';
  #closed = false;
  /** Frames handed to viewers so far (tests and benchmarks read it; never the frames). */
  framesSent = 0;

  constructor(
    private readonly session: PageSession,
    private readonly person: () => LivePerson,
  ) {}

  get viewers(): number {
    return this.#viewers.size;
  }

  /** Whether the screencast runs now. */
  get casting(): boolean {
    return this.#cast !== undefined;
  }

  /** Adds a viewer, tells it who holds the page, and starts the screencast if it is the first. */
  watch(viewer: LiveViewer): () => void {
    if (this.#closed) {
      viewer.end();
      return () => undefined;
    }
    this.#viewers.add(viewer);
    viewer.send({ event: 'state', data: { person: this.person() } });
    // A dialog open already: no frame will show it.
    const dialog = this.#dialog();
    if (dialog !== null) viewer.send({ event: 'dialog', data: { dialog } });
    if (this.#viewers.size === 1) this.#start();
    return () => {
      if (!this.#viewers.delete(viewer) || this.#viewers.size > 0) return;
      this.#stop();
    };
  }

  /** Tells every viewer who holds the page now (a control began, ended or was renewed). */
  tellState(): void {
    const event: LiveEvent = { event: 'state', data: { person: this.person() } };
    for (const viewer of this.#viewers) viewer.send(event);
  }

  /** Tells the viewers of a navigation or popup the fence refused since the last look. */
  checkBlocked(): void {
    const now = this.session.blocked?.();
    if (!now) return;
    const seen = this.#blockedSeen;
    this.#blockedSeen = now;
    if (!seen) return;
    const navigations = now.navigation - seen.navigation;
    const popups = now.popup - seen.popup;
    if (navigations + popups === 0) return;
    const event: LiveEvent = { event: 'blocked', data: { navigations, popups } };
    for (const viewer of this.#viewers) viewer.send(event);
  }

  /** The page goes away: every viewer's stream ends and the screencast stops. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return this.#stopping;
    this.#closed = true;
    for (const viewer of this.#viewers) viewer.end();
    this.#viewers.clear();
    this.#stop();
    await this.#stopping;
  }

  #start(): void {
    const tab = this.session.currentTab?.();
    if (!tab) return;
    // A stop still under way finishes first: two screencasts never share a page.
    this.#stopping = this.#stopping.then(() => {
      if (this.#viewers.size === 0 || this.#cast) return;
      this.#cast = new TabScreencast(tab, (frame) => this.#frame(frame));
    });
    this.#blockedSeen = this.session.blocked?.();
    this.#blockedTimer = setInterval(() => this.checkBlocked(), BLOCKED_CHECK_MS);
    this.#blockedTimer.unref();
    this.#dialogTold = JSON.stringify(this.#dialog());
    this.#unwatchDialogs = tab.onDialogChange?.(() => this.#tellDialog());
  }

  #stop(): void {
    clearInterval(this.#blockedTimer);
    this.#blockedTimer = undefined;
    this.#unwatchDialogs?.();
    this.#unwatchDialogs = undefined;
    this.#stopping = this.#stopping.then(async () => {
      const cast = this.#cast;
      if (!cast || this.#viewers.size > 0) return;
      this.#cast = undefined;
      await cast.stop();
    });
  }

  #dialog(): LiveDialog['dialog'] {
    return this.session.currentTab?.().dialog?.() ?? null;
  }

  /** Tells the viewers of the current tab's dialog when it changed since they were last told. */
  #tellDialog(): void {
    const dialog = this.#dialog();
    const told = JSON.stringify(dialog);
    if (told === this.#dialogTold) return;
    this.#dialogTold = told;
    const event: LiveEvent = { event: 'dialog', data: { dialog } };
    for (const viewer of this.#viewers) viewer.send(event);
  }

  #frame(frame: ScreencastFrame): void {
    if (this.#viewers.size === 0) return;
    this.framesSent += 1;
    const event: LiveEvent = { event: 'frame', data: frame };
    for (const viewer of this.#viewers) viewer.send(event);
  }
}
