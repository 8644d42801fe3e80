import type { Page, Route } from 'playwright-core';

/** The page a paused request belongs to: null for a new page's first navigation, undefined for a worker's. */
export type RequestPage = Page | null | undefined;

/**
 * The requests a fence has paused and not answered yet. Each is answered once, by the fence: a
 * removal never lets one go, because removing a route (or detaching a DevTools session with Fetch
 * enabled) continues whatever it paused, unfenced — a popup's held navigation reached a disallowed
 * site that way after its lease closed. A request of a page that ended (it crashed, or the fence
 * is closing it) or of a fence that stopped is aborted, whether it was held then or comes later.
 */
export class HeldRequests {
  private readonly held = new Map<Route, RequestPage>();
  private readonly ended = new WeakSet<Page>();
  private stopped = false;

  /** @param own keeps an abort the fence started in the background, so its close waits for it */
  constructor(private readonly own: (work: Promise<unknown>) => void) {}

  /**
   * Holds `route` while `decide` answers it (with {@link pass} or {@link refuse}). One the decision
   * left unanswered (it failed: its page went away) is aborted, never left paused.
   */
  async hold(route: Route, page: RequestPage, decide: () => Promise<void>): Promise<void> {
    this.held.set(route, page);
    try {
      if (this.isEnded(page)) await this.refuse(route, 'aborted');
      else await decide();
    } finally {
      if (this.held.delete(route)) await route.abort('aborted').catch(() => undefined);
    }
  }

  /** Lets a held request go on; aborts it instead when its page, or the fence, ended meanwhile. */
  async pass(route: Route, page: RequestPage): Promise<void> {
    if (!this.held.delete(route)) return;
    if (this.isEnded(page)) await route.abort('aborted');
    else await route.continue();
  }

  /** Aborts a held request; false when it was aborted already (its page or the fence ended). */
  async refuse(route: Route, errorCode: string): Promise<boolean> {
    if (!this.held.delete(route)) return false;
    await route.abort(errorCode);
    return true;
  }

  /** True once `page`'s requests (or every request, the fence stopped) are to be aborted. */
  isEnded(page: RequestPage): boolean {
    return this.stopped || (page !== null && page !== undefined && this.ended.has(page));
  }

  /** A page that crashed or that the fence closes: what it has held is aborted, and what it asks later. */
  end(page: Page): void {
    this.ended.add(page);
    this.abort((of) => of === page);
  }

  /** The fence is closing: everything held is aborted, and everything that comes later. */
  stop(): void {
    this.stopped = true;
    this.abort(() => true);
  }

  private abort(which: (page: RequestPage) => boolean): void {
    for (const [route, page] of [...this.held]) {
      if (!which(page)) continue;
      this.held.delete(route);
      this.own(route.abort('aborted'));
    }
  }
}
