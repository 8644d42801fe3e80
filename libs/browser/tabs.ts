import type { Page } from 'playwright-core';
import { type BrowserObservation, MAX_TABS_PER_LEASE } from '../contracts/index.js';
import { PageAgentWorld } from './agent-call.js';
import { DialogWatch } from './dialogs.js';
import { type Operation, sleepMs, within } from './operation.js';
import { PageCapture } from './page-capture.js';
import type { ContextFence } from './page-fence.js';
import { RequestTracker } from './request-tracker.js';

/**
 * How long a new page's held first navigation is waited for until Playwright names its page: a
 * `target=_blank` link starts a renderer of its own, which measured hundreds of milliseconds. An
 * older held one belongs to a popup its opener closed at once.
 */
const HELD_POPUP_WAIT_MS = 2_000;
const HELD_POPUP_POLL_MS = 20;
/** How long a kept tab's first navigation is waited for to commit before the call goes on without it. */
const TAB_COMMIT_WAIT_MS = 5_000;
/** Time kept back from the call's deadline, while waiting for a tab, to settle and observe a page. */
const OPENING_RESERVE_MS = 1_000;
/** How long closing the engine waits for tabs still opening before it lets them go. */
const OPENING_CLOSE_BOUND_MS = 2_000;

export type TabsObservation = NonNullable<BrowserObservation['tabs']>;

/**
 * Everything the engine holds for one page (issue 14): its request tracker, its agent's isolated
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
  ) {}

  static async open(page: Page): Promise<PageBundle> {
    // Before the first await, so no request and no dialog of the page is missed.
    const tracker = new RequestTracker(page);
    const dialogs = new DialogWatch(page);
    try {
      const agent = await PageAgentWorld.open(page);
      return new PageBundle(page, tracker, agent, new PageCapture(page), dialogs);
    } catch (error) {
      tracker.close();
      await dialogs.close();
      throw error;
    }
  }

  /** Stops watching the page; a dialog nobody answered is dismissed. The page stays. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      this.tracker.close();
      await this.dialogs.close();
      await this.capture.close();
      await this.agent.close();
    })();
    return this.closing;
  }
}

/**
 * The lease's pages, in the order they opened (issue 14). The newest is the current one the engine
 * observes and acts on: a page the fence keeps (a popup, a `target=_blank` link, `window.open` on
 * an allowed origin) is pushed and becomes current; when the current page closes or crashes, the
 * one before it is current again. At most {@link MAX_TABS_PER_LEASE} pages: one more closes the
 * oldest, which is never the current one. The last page left is never dropped — a lease without it
 * has nothing to act on, and its calls fail as on any closed page.
 */
export class TabStack {
  private readonly bundles: PageBundle[];
  private event: TabsObservation['event'] = null;
  private readonly opening = new Set<{ work: Promise<void>; startedAtMs: number }>();
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
   * Waits (inside the call's deadline) for the pages the fence is still deciding on, so the call
   * during which a tab opened observes it. A page that commits later is current from the next call.
   */
  async openingSettled(op: Operation): Promise<void> {
    // Time is kept back to settle and observe whichever page is current then.
    const untilMs = op.deadlineMs - OPENING_RESERVE_MS;
    for (;;) {
      const nowMs = Date.now();
      if (op.ended() || nowMs >= untilMs) return;
      // A tab whose first navigation has not committed in its time is left to a later call.
      const young = [...this.opening].filter((opening) => opening.startedAtMs >= nowMs - TAB_COMMIT_WAIT_MS);
      if (young.length > 0) {
        const oldestMs = Math.min(...young.map((opening) => opening.startedAtMs));
        const waited = await within(
          Promise.race(young.map((opening) => opening.work)),
          Math.min(untilMs, oldestMs + TAB_COMMIT_WAIT_MS),
          op.signal,
        );
        if (!waited.done && op.ended()) return;
        continue;
      }
      if (this.fence.popupsHeldSince(nowMs - HELD_POPUP_WAIT_MS) === 0) return;
      await sleepMs(Math.min(HELD_POPUP_POLL_MS, untilMs - nowMs), op.signal);
    }
  }

  /**
   * What the observation says of the tabs, once: absent while the lease has one page and nothing
   * changed since the last observation.
   */
  observed(): TabsObservation | undefined {
    const event = this.event;
    this.event = null;
    if (this.bundles.length === 1 && event === null) return undefined;
    return { count: this.bundles.length, index: this.bundles.length - 1, event };
  }

  /**
   * Stops watching every page; the pages themselves belong to the caller's context. The stack
   * keeps its pages, so a call still under way finds a current one (and fails on it, closed).
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await within(
      Promise.all([...this.opening].map((opening) => opening.work)),
      Date.now() + OPENING_CLOSE_BOUND_MS,
    );
    await Promise.allSettled([...this.settling]);
    await Promise.all(this.bundles.map((bundle) => bundle.close()));
  }

  private opened(page: Page, kept: Promise<boolean>): void {
    if (this.closed) return;
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
    const opening = { work, startedAtMs: Date.now() };
    this.opening.add(opening);
    void work.finally(() => this.opening.delete(opening));
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
