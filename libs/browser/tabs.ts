import type { Page } from 'playwright-core';
import { type BrowserObservation, MAX_TABS_PER_LEASE } from '../contracts/index.js';
import { PageAgentWorld } from './agent-call.js';
import { DialogWatch } from './dialogs.js';
import { type Operation, within } from './operation.js';
import { PageCapture } from './page-capture.js';
import type { ContextFence } from './page-fence.js';
import { RequestTracker } from './request-tracker.js';
import { WindowOpens } from './window-opens.js';

/** Time kept back from the call's deadline, while waiting for a tab, to settle and observe a page. */
const OPENING_RESERVE_MS = 1_000;
/**
 * How long an announced tab that never appeared is still told pending: Chromium announced a window
 * it then did not create (or Playwright never reported). Past this it is forgotten.
 */
const ANNOUNCED_FORGET_MS = 60_000;
/** How long closing the engine waits for tabs still opening before it lets them go. */
const OPENING_CLOSE_BOUND_MS = 2_000;

export type TabsObservation = NonNullable<BrowserObservation['tabs']>;

/**
 * Everything the engine holds for one page: its request tracker, its agent's isolated
 * world, its screenshots and its dialogs. Created right after the page appears: requests and
 * dialogs are seen from then on.
 */
export class PageBundle {
  private closing: Promise<void> | undefined;

  private constructor(
    readonly page: Page,
    readonly tracker: RequestTracker,
    readonly agent: PageAgentWorld,
    readonly capture: PageCapture,
    readonly dialogs: DialogWatch,
    /** Chromium's announcements of the windows this page opens. */
    readonly opens: WindowOpens,
  ) {}

  static async open(page: Page): Promise<PageBundle> {
    // Before the first await, so no request and no dialog of the page is missed.
    const tracker = new RequestTracker(page);
    const dialogs = new DialogWatch(page);
    const opens = WindowOpens.watch(page);
    try {
      const agent = await PageAgentWorld.open(page);
      return new PageBundle(page, tracker, agent, new PageCapture(page), dialogs, await opens);
    } catch (error) {
      tracker.close();
      await dialogs.close();
      await (await opens).close();
      throw error;
    }
  }

  /** Stops watching the page; a dialog nobody answered is dismissed. The page stays. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.tracker.close();
      // The dialog first: a DevTools session with the Page domain on that detaches while a
      // dialog is open leaves the page waiting for an answer that never comes.
      await this.dialogs.close();
      await this.opens.close();
      await this.capture.close();
      await this.agent.close();
    })();
    return this.closing;
  }
}

/**
 * A new tab announced to the lease: by Chromium when the current page opened a window, or by
 * Playwright's page event when that came first. It is decided when the fence kept the page (its
 * first navigation committed) or closed it.
 */
interface Announcement {
  readonly atMs: number;
  /** Set once a new page was matched to it. */
  matched: boolean;
  decided: boolean;
  readonly done: Promise<void>;
  readonly decide: () => void;
}

/**
 * The lease's pages, in the order they opened. The newest is the current one the engine observes
 * and acts on: a page the fence keeps (a popup, a `target=_blank` link, `window.open` on an allowed
 * origin) is pushed and becomes current, and the next observation says so (`tabs.event`); when the
 * current page closes or crashes, the one before it is current again. At most
 * {@link MAX_TABS_PER_LEASE} pages: one more closes the oldest, which is never the current one. The
 * last page left is never dropped — a lease without it has nothing to act on, and its calls fail as
 * on any closed page.
 *
 * A tab the current page announces is waited for by the call it was announced in (see
 * {@link announcedSettled}); one not decided in time is told `tabs.pending` until it is.
 */
export class TabStack {
  private readonly bundles: PageBundle[];
  private event: TabsObservation['event'] = null;
  private readonly opening = new Set<Promise<void>>();
  private readonly announced: Announcement[] = [];
  private readonly settling = new Set<Promise<unknown>>();
  private closed = false;

  constructor(
    first: PageBundle,
    private readonly fence: ContextFence,
    /** Told when the current page changes: every earlier reference is void then. */
    private readonly onSwitch: () => void,
  ) {
    this.bundles = [first];
    this.watch(first);
    fence.onNewPage((page, kept) => this.opened(page, kept));
  }

  get current(): PageBundle {
    // The last page left is never dropped, so there is always one.
    return this.bundles[this.bundles.length - 1] as PageBundle;
  }

  get count(): number {
    return this.bundles.length;
  }

  /**
   * Waits (inside the call's deadline, keeping time to settle and observe) until every tab announced
   * since `sinceMs` is decided, so the call that opened a tab answers with it current. No call
   * waits for a tab nobody announced; one still undecided at the deadline is told pending.
   */
  async announcedSettled(op: Operation, sinceMs: number): Promise<void> {
    const untilMs = op.deadlineMs - OPENING_RESERVE_MS;
    for (;;) {
      const waiting = this.undecided().filter((announcement) => announcement.atMs >= sinceMs);
      if (waiting.length === 0 || op.ended() || Date.now() >= untilMs) return;
      const waited = await within(
        Promise.all(waiting.map((announcement) => announcement.done)),
        untilMs,
        op.signal,
      );
      if (!waited.done) return;
    }
  }

  /**
   * What the observation says of the tabs, once: absent while the lease has one page, nothing
   * changed since the last observation and no announced tab is pending.
   */
  observed(): TabsObservation | undefined {
    const event = this.event;
    this.event = null;
    const pending = this.undecided().length;
    if (this.bundles.length === 1 && event === null && pending === 0) return undefined;
    const tabs = { count: this.bundles.length, index: this.bundles.length - 1, event };
    return pending > 0 ? { ...tabs, pending } : tabs;
  }

  /**
   * Stops watching every page; the pages themselves belong to the caller's context. The stack
   * keeps its pages, so a call still under way finds a current one (and fails on it, closed).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await within(Promise.all([...this.opening]), Date.now() + OPENING_CLOSE_BOUND_MS);
    for (const announcement of this.announced.splice(0)) announcement.decide();
    await Promise.allSettled([...this.settling]);
    await Promise.all(this.bundles.map((bundle) => bundle.close()));
  }

  /** The announcements not decided yet; one that never appeared is forgotten after a while. */
  private undecided(): Announcement[] {
    const forgetBeforeMs = Date.now() - ANNOUNCED_FORGET_MS;
    for (let at = this.announced.length - 1; at >= 0; at -= 1) {
      const announcement = this.announced[at] as Announcement;
      if (announcement.decided || (!announcement.matched && announcement.atMs < forgetBeforeMs)) {
        this.announced.splice(at, 1);
        announcement.decide();
      }
    }
    return [...this.announced];
  }

  private announce(): Announcement {
    let decide: () => void = () => undefined;
    const done = new Promise<void>((resolve) => {
      decide = resolve;
    });
    const announcement: Announcement = {
      atMs: Date.now(),
      matched: false,
      decided: false,
      done,
      decide: () => {
        announcement.decided = true;
        decide();
      },
    };
    this.announced.push(announcement);
    return announcement;
  }

  private opened(page: Page, kept: Promise<boolean>): void {
    if (this.closed) return;
    // Chromium announced it earlier (the oldest announcement is this page's); else this is its announcement.
    const announcement =
      this.announced.find((candidate) => !candidate.matched && !candidate.decided) ?? this.announce();
    announcement.matched = true;
    // The bundle is made at once, so the tab's requests and a dialog on its load are seen.
    const bundle = PageBundle.open(page);
    const work = (async () => {
      const opened = await bundle.catch(() => null);
      if (!(await kept) || opened === null || this.closed || page.isClosed()) {
        await opened?.close();
        return;
      }
      this.push(opened);
    })();
    this.opening.add(work);
    void work.finally(() => {
      this.opening.delete(work);
      announcement.decide();
    });
  }

  private push(bundle: PageBundle): void {
    this.bundles.push(bundle);
    this.watch(bundle);
    this.switched('opened');
    while (this.bundles.length > MAX_TABS_PER_LEASE) {
      const oldest = this.bundles.shift() as PageBundle;
      this.own(oldest.close().then(() => oldest.page.close()));
    }
  }

  private watch(bundle: PageBundle): void {
    // Only the current page's announcements are the lease's calls' to wait for.
    bundle.opens.onOpen(() => {
      if (!this.closed && bundle === this.current) this.announce();
    });
    bundle.page.once('close', () => this.drop(bundle));
    // A crashed page is dead: it is closed, and the one before it is current again.
    bundle.page.once('crash', () => {
      if (this.drop(bundle)) this.own(bundle.page.close());
    });
  }

  /** Forgets a page that closed or crashed; true when it was one of the stack's. */
  private drop(bundle: PageBundle): boolean {
    const index = this.bundles.indexOf(bundle);
    if (index === -1 || this.bundles.length === 1 || this.closed) return false;
    const wasCurrent = index === this.bundles.length - 1;
    this.bundles.splice(index, 1);
    this.own(bundle.close());
    if (wasCurrent) this.switched('closed');
    return true;
  }

  private switched(event: 'opened' | 'closed'): void {
    this.event = event;
    this.fence.follow(this.current.page);
    this.onSwitch();
  }

  /** Keeps a background close owned, so close() waits for it; never rejects. */
  private own(work: Promise<unknown>): void {
    const owned = work.catch(() => undefined);
    this.settling.add(owned);
    void owned.finally(() => this.settling.delete(owned));
  }
}
