import type { Frame, Page, Request, Response } from 'playwright-core';

/** ADR-0159: only these application requests hold settling back. */
export const SETTLE_REQUEST_TYPES: ReadonlySet<string> = new Set([
  'document',
  'script',
  'stylesheet',
  'fetch',
  'xhr',
]);

/** ADR-0159: a settling snapshot holds at most 256 requests; more is an overflow (`bound_expired`). */
export const SETTLE_SNAPSHOT_LIMIT = 256;

/** The requests that were in flight when settling began. Later requests never join it. */
export interface RequestSnapshot {
  readonly pending: Set<Request>;
  /** More requests were in flight than the snapshot holds: the page cannot be shown to have settled. */
  overflowed: boolean;
}

/**
 * A response with no body to wait for, or whose body never ends: it leaves the in-flight set at its
 * headers (ADR-0159: an event stream's body is never awaited; 204 and 304 carry none).
 */
export function leavesAtHeaders(status: number, contentType: string | undefined): boolean {
  if (status === 204 || status === 304) return true;
  return (contentType ?? '').toLowerCase().includes('text/event-stream');
}

/**
 * Tracks a page's in-flight application requests from the moment it is created. A new main-frame
 * document clears the set: the outgoing document's requests no longer hold anything back.
 */
export class RequestTracker {
  private readonly inFlight = new Set<Request>();
  private readonly waiters = new Set<() => void>();
  /** Counts main-frame documents committed since tracking began. */
  private documentCount = 0;
  private readonly detach: () => void;
  /** The main-frame document request not yet committed, if any. */
  private mainNavigation: Request | null = null;
  /** The document count at the main frame's last `load`; -1 before any. */
  private loadedDocument = -1;

  constructor(private readonly page: Page) {
    const onRequest = (request: Request) => {
      if (SETTLE_REQUEST_TYPES.has(request.resourceType())) this.inFlight.add(request);
      if (this.isMainFrameNavigation(request)) this.mainNavigation = request;
    };
    const onResponse = (response: Response) => {
      const request = response.request();
      // A navigation answered 204 or 205 commits no document: the old one stays.
      if (request === this.mainNavigation && (response.status() === 204 || response.status() === 205)) {
        this.mainNavigation = null;
      }
      if (leavesAtHeaders(response.status(), response.headers()['content-type'])) this.leave(request);
    };
    const onDone = (request: Request) => this.leave(request);
    const onFailed = (request: Request) => {
      if (request === this.mainNavigation) this.mainNavigation = null;
      this.leave(request);
    };
    const onNavigated = (frame: Frame) => {
      // Same-document navigations (pushState, fragments) send no request and keep the set.
      if (frame !== this.page.mainFrame() || this.mainNavigation === null) return;
      this.mainNavigation = null;
      // The new document has committed: every request counted so far belongs to the outgoing one
      // (Chromium reports the commit before the new document's parser asks for anything).
      this.documentCount += 1;
      this.inFlight.clear();
      this.wake();
    };
    const onLoad = () => {
      this.loadedDocument = this.documentCount;
    };
    page.on('request', onRequest);
    page.on('response', onResponse);
    page.on('requestfinished', onDone);
    page.on('requestfailed', onFailed);
    page.on('framenavigated', onNavigated);
    page.on('load', onLoad);
    this.detach = () => {
      page.off('load', onLoad);
      page.off('request', onRequest);
      page.off('response', onResponse);
      page.off('requestfinished', onDone);
      page.off('requestfailed', onFailed);
      page.off('framenavigated', onNavigated);
    };
  }

  /** True while a main-frame document request is on its way and has not committed. */
  get navigationPending(): boolean {
    return this.mainNavigation !== null;
  }

  /**
   * Whether the current document is known, from the browser's own events, to have loaded with no
   * navigation on its way: its `load` came after its commit. False means unknown, not "loading":
   * a document this tracker saw commit without a request is never claimed loaded here.
   */
  get loadedNow(): boolean {
    return this.mainNavigation === null && this.loadedDocument === this.documentCount;
  }

  /** Main-frame documents committed so far; a change means a navigation happened. */
  get documents(): number {
    return this.documentCount;
  }

  get inFlightCount(): number {
    return this.inFlight.size;
  }

  /** The in-flight requests at this moment, at most {@link SETTLE_SNAPSHOT_LIMIT}. */
  snapshot(): RequestSnapshot {
    const snapshot: RequestSnapshot = { pending: new Set(), overflowed: false };
    this.extend(snapshot);
    return snapshot;
  }

  /**
   * Adds what is in flight now to a snapshot, up to its limit. Settling does this once more when
   * the document is ready: a navigation's entry comes before its document could ask for anything.
   */
  extend(snapshot: RequestSnapshot): void {
    for (const request of this.inFlight) {
      if (snapshot.pending.has(request)) continue;
      if (snapshot.pending.size === SETTLE_SNAPSHOT_LIMIT) {
        snapshot.overflowed = true;
        return;
      }
      snapshot.pending.add(request);
    }
  }

  /** Drops requests that already left; true when none of the snapshot is still in flight. */
  drained(snapshot: RequestSnapshot): boolean {
    for (const request of snapshot.pending) {
      if (!this.inFlight.has(request)) snapshot.pending.delete(request);
    }
    return snapshot.pending.size === 0;
  }

  /** Resolves at the next change of the in-flight set (a request leaving or a new document). */
  nextChange(): { promise: Promise<void>; cancel: () => void } {
    let wake: () => void = () => undefined;
    const promise = new Promise<void>((resolve) => {
      wake = resolve;
    });
    this.waiters.add(wake);
    return { promise, cancel: () => this.waiters.delete(wake) };
  }

  close(): void {
    this.detach();
    this.inFlight.clear();
    this.wake();
  }

  private leave(request: Request): void {
    if (this.inFlight.delete(request)) this.wake();
  }

  private wake(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }

  private isMainFrameNavigation(request: Request): boolean {
    if (!request.isNavigationRequest()) return false;
    try {
      return request.frame() === this.page.mainFrame();
    } catch {
      return false;
    }
  }
}
