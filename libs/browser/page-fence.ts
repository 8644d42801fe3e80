import type { BrowserContext, Frame, Page, Request, Route, WebSocketRoute } from 'playwright-core';
import { HeldRequests, type RequestPage } from './held-requests.js';
import {
  type BlockedKind,
  type FencePolicy,
  fenceAllows,
  normalizeOrigins,
  OriginGuard,
} from './origin-guard.js';

/** The profile's settings a fence is built from (issue 11). */
export interface FenceOptions {
  allowedOrigins: readonly string[];
  /** Origins child frames may load besides the allowed ones (payment or sign-in embeds); none by default. */
  frameOrigins?: readonly string[] | undefined;
  /** `allowed_origins` restricts subresources to allowed ∪ frame origins; `any` (the default) does not. */
  subresources?: 'any' | 'allowed_origins' | undefined;
}

export function compileFencePolicy(options: FenceOptions): FencePolicy {
  const pages = normalizeOrigins(options.allowedOrigins);
  const frames = new Set([...pages, ...normalizeOrigins(options.frameOrigins ?? [])]);
  return {
    pages,
    frames,
    subresources: (options.subresources ?? 'any') === 'allowed_origins' ? frames : null,
  };
}

/** How many requests the fence blocked so far, by kind; a change across a call means it hit the fence. */
export type BlockedCounts = Record<BlockedKind, number>;

/** How many held-back popup navigations wait for their page at most. */
const HELD_POPUPS_LIMIT = 64;

interface FrameGuard {
  guard: Promise<OriginGuard | null>;
  /** Set once `guard` settled: requests the frame started later are seen by it, redirects too. */
  ready: boolean;
}

/** A new page's first navigation, held back until the page is guarded (see {@link ContextFence}). */
interface HeldPopup {
  request: Request;
  allowed: boolean;
}

/**
 * Fences every page and frame of one browser context — the lease's first page, popups, new tabs,
 * child frames and (when the profile says so) subresources — before their first request leaves
 * (issue 11.2, 11.3). Playwright's context routing pauses the first request of every target,
 * popups included, before it is sent; each page also gets an {@link OriginGuard} for redirect
 * hops, which routing does not see.
 *
 * A popup's first navigation comes before Playwright can name its page, so it cannot be guarded
 * for redirects yet: it is held back (aborted) and, once the page exists and is guarded, sent again
 * when its origin is allowed or the page closed when it is not. An allowed popup stays open.
 *
 * A request the fence pauses is answered by it alone, and never let go by a removal: removing a
 * route (or detaching a guard's DevTools session) continues whatever it paused, unfenced. So a
 * request still held when its page crashes, when the fence closes the page, or when the fence
 * closes is aborted, as is every request that reaches the fence afterwards; and {@link close}
 * closes the context before it removes anything.
 */
export class ContextFence {
  private readonly guards = new Map<Page, Promise<OriginGuard>>();
  /**
   * Child frames' own guards: an {@link OriginGuard} for a frame in a process of its own, null for
   * one that shares its page's target. Renewed at each commit, which may move a frame.
   */
  private readonly frameGuards = new Map<Frame, FrameGuard>();
  private readonly heldPopups: HeldPopup[] = [];
  private readonly pending = new Set<Promise<unknown>>();
  private readonly held = new HeldRequests((work) => this.track(work));
  private readonly counts: BlockedCounts = { navigation: 0, popup: 0, frame: 0, subresource: 0 };
  private ending: Promise<void> | undefined;
  /** Issue 14: whose blocked top-level navigations fail the call (`navigation`) rather than count as `popup`. */
  private current: Page;
  private pageListener: NewPageListener | undefined;
  private readonly onPage = (page: Page) => {
    const adopted = this.adopt(page);
    this.track(adopted);
    this.pageListener?.(
      page,
      adopted.catch(() => false),
    );
  };
  private readonly onRoute = (route: Route) => {
    const page = pageOf(route.request());
    this.track(this.held.hold(route, page, () => this.route(route, page)));
  };
  private readonly onWebSocket = (socket: WebSocketRoute) => this.webSocket(socket);

  private constructor(
    private readonly context: BrowserContext,
    primary: Page,
    readonly policy: FencePolicy,
  ) {
    this.current = primary;
  }

  /**
   * Fences `primary`'s context. A blocked top-level navigation of `primary` (or of the page
   * {@link follow} names later) counts as a `navigation` (its call fails `url_disallowed`); one of
   * any other page counts as a `popup`.
   */
  static async install(primary: Page, options: FenceOptions): Promise<ContextFence> {
    const context = primary.context();
    const fence = new ContextFence(context, primary, compileFencePolicy(options));
    context.on('page', fence.onPage);
    await context.route('**/*', fence.onRoute);
    // WebSockets pass neither routing nor the Fetch domain; Playwright's WebSocket routing replaces
    // the page's constructor. Defence in depth only: page code holding a constructor from a realm
    // it made before the replacement could still connect (README, Security).
    if (fence.policy.subresources !== null) await context.routeWebSocket(/.*/, fence.onWebSocket);
    await fence.guard(primary);
    return fence;
  }

  /**
   * Issue 14: the page the lease now observes and acts on (its current tab). Its blocked top-level
   * navigations count as `navigation`; every other page's as `popup`.
   */
  follow(page: Page): void {
    this.current = page;
  }

  /**
   * Issue 14: told of every new page of the context as it appears, with whether the fence kept it —
   * true once it is guarded and its held first navigation (if any) was sent on and committed; false
   * when it was closed for its origin or that navigation failed. One listener; never rejects.
   */
  onNewPage(listener: NewPageListener): void {
    this.pageListener = listener;
  }

  /** A snapshot of the blocked counts. */
  blocked(): BlockedCounts {
    return { ...this.counts };
  }

  /** Guards `page` against redirect hops; idempotent, and awaited before any of its requests leaves. */
  guard(page: Page): Promise<OriginGuard> {
    let guard = this.guards.get(page);
    if (!guard) {
      // A child frame that commits in a process of its own is guarded before it navigates again.
      page.on('framenavigated', (frame) => {
        if (frame.parentFrame() === null || this.ending !== undefined) return;
        // The commit may have moved the frame into another process: guard whichever target it has now.
        const previous = this.frameGuards.get(frame);
        this.frameGuards.delete(frame);
        this.track(
          this.guardFrame(frame).then(async () => {
            const old = await previous?.guard;
            if (old && old !== (await this.frameGuards.get(frame)?.guard)) await old.close();
          }),
        );
      });
      guard = OriginGuard.install(
        page,
        this.policy,
        (kind) => this.count(kind, page),
        () => this.held.isEnded(page),
      );
      this.guards.set(page, guard);
      guard.catch(() => this.guards.delete(page));
      // A crashed page's held requests would otherwise wait for a removal to let them go.
      page.once('crash', () => this.held.end(page));
      page.once('close', () => {
        this.guards.delete(page);
        guard?.then((installed) => installed.close()).catch(() => undefined);
      });
    }
    return guard;
  }

  /**
   * Guards a child frame's own target when it has one; null for a frame that shares its page's
   * target, which the page's guard covers (until a commit moves it: see {@link guard}).
   */
  private guardFrame(frame: Frame): Promise<OriginGuard | null> {
    const known = this.frameGuards.get(frame);
    if (known) return known.guard;
    const entry: FrameGuard = {
      guard: OriginGuard.install(
        frame,
        this.policy,
        (kind) => this.count(kind),
        () => this.held.isEnded(frame.page()),
      ).catch(() => null),
      ready: false,
    };
    this.frameGuards.set(frame, entry);
    void entry.guard.then((installed) => {
      entry.ready = true;
      if (installed !== null) frame.page().once('close', () => void installed.close());
    });
    return entry.guard;
  }

  private async restartFrameNavigation(route: Route, frame: Frame): Promise<void> {
    const request = route.request();
    if (!(await this.held.refuse(route, 'aborted'))) return;
    if (request.method() !== 'GET' || !fenceAllows(this.policy, 'frame', request.url())) {
      this.count('frame');
      return;
    }
    const referer = request.headers().referer;
    await frame.goto(request.url(), { waitUntil: 'commit', ...(referer ? { referer } : {}) });
  }

  /**
   * Ends the context for good (a lease's close, its expiry, its revocation): every request held
   * is aborted and every later one too; the context is closed, every page with it; only then are
   * the routes removed and the guards' sessions detached — either, while a page could still
   * send, would continue its paused requests unfenced. Idempotent.
   */
  close(): Promise<void> {
    this.ending ??= (async () => {
      this.stop();
      await this.context.close().catch(() => undefined);
      await this.remove();
    })();
    return this.ending;
  }

  /**
   * For a caller that keeps the pages (a benchmark's unfenced floor): every request held is
   * aborted, then the routes and guards are removed, and the pages go on unfenced. Idempotent.
   */
  release(): Promise<void> {
    this.ending ??= (async () => {
      this.stop();
      await this.remove();
    })();
    return this.ending;
  }

  /** From now on every request held or reaching the fence (routes and guards) is aborted. */
  private stop(): void {
    this.context.off('page', this.onPage);
    this.held.stop();
  }

  private async remove(): Promise<void> {
    await this.context.unroute('**/*', this.onRoute).catch(() => undefined);
    await Promise.allSettled([...this.pending]);
    const guards = await Promise.allSettled([
      ...this.guards.values(),
      ...[...this.frameGuards.values()].map((entry) => entry.guard),
    ]);
    this.guards.clear();
    this.frameGuards.clear();
    for (const guard of guards) if (guard.status === 'fulfilled') await guard.value?.close();
  }

  private count(kind: BlockedKind, page?: Page): void {
    this.counts[kind === 'navigation' && page !== this.current ? 'popup' : kind] += 1;
  }

  /** Keeps a background decision owned by the fence, so close() can wait for it; never rejects. */
  private track(work: Promise<unknown>): void {
    const owned = work.catch(() => undefined);
    this.pending.add(owned);
    void owned.finally(() => this.pending.delete(owned));
  }

  private async route(route: Route, page: RequestPage): Promise<void> {
    const request = route.request();
    if (page === undefined) {
      // A service worker's own request: no page to fence it by, so it counts as a subresource.
      return this.decide(route, 'subresource', request.url());
    }
    if (page === null) {
      // Issue 11.2: a new page's first navigation, before Playwright names the page.
      const allowed = fenceAllows(this.policy, 'page', request.url());
      if (!allowed) this.count('popup');
      this.heldPopups.push({ request, allowed });
      // A popup its opener closes before Playwright reports it is never matched: forget the oldest.
      if (this.heldPopups.length > HELD_POPUPS_LIMIT) this.heldPopups.shift();
      // BlockedByClient commits an error page, which is what makes Playwright report the page.
      await this.held.refuse(route, 'blockedbyclient');
      return;
    }
    // The page's redirect guard is in place before its first request is let through.
    await this.guard(page);
    const frame = request.frame();
    if (
      frame.parentFrame() !== null &&
      (request.isNavigationRequest() || this.policy.subresources !== null)
    ) {
      // A frame in a process of its own starts navigations (and requests) its page's guard does not see.
      const guardedBefore = this.frameGuards.get(frame)?.ready === true;
      const guard = await this.guardFrame(frame);
      if (guard !== null && !guardedBefore && request.isNavigationRequest()) {
        // Its guard came after this navigation began, so would miss its redirects: start it again.
        return this.restartFrameNavigation(route, frame);
      }
    }
    const kind = !request.isNavigationRequest()
      ? 'subresource'
      : frame.parentFrame() === null
        ? 'page'
        : 'frame';
    return this.decide(route, kind, request.url(), page);
  }

  private async decide(
    route: Route,
    kind: 'page' | 'frame' | 'subresource',
    url: string,
    page?: Page,
  ): Promise<void> {
    if (fenceAllows(this.policy, kind, url)) {
      await this.held.pass(route, page);
      return;
    }
    this.count(kind === 'page' ? 'navigation' : kind, page);
    // Aborted, not BlockedByClient: a blocked navigation leaves the page on its document.
    await this.held.refuse(route, kind === 'subresource' ? 'blockedbyclient' : 'aborted');
  }

  private webSocket(socket: WebSocketRoute): void {
    // A closing fence lets nothing new out, whatever its origin.
    if (this.ending !== undefined) {
      socket.close({ code: 1001, reason: 'closing' }).catch(() => undefined);
      return;
    }
    if (fenceAllows(this.policy, 'subresource', socket.url().replace(/^ws/i, 'http'))) {
      socket.connectToServer();
      return;
    }
    this.count('subresource');
    socket.close({ code: 1008, reason: 'blocked' }).catch(() => undefined);
  }

  /**
   * Guards a new page; a popup whose first navigation was held back is closed or sent on. True
   * when the page stays: guarded and, if held, committed on its allowed first navigation.
   */
  private async adopt(page: Page): Promise<boolean> {
    await this.guard(page);
    const index = this.heldPopups.findIndex((held) => pageOf(held.request) === page);
    if (index === -1) return true;
    const [held] = this.heldPopups.splice(index, 1);
    // Its later held navigations (the opener moved it on before it was named) were blocked and
    // counted already; none is sent on.
    for (let at = this.heldPopups.length - 1; at >= 0; at -= 1) {
      const later = this.heldPopups[at];
      if (later && pageOf(later.request) === page) this.heldPopups.splice(at, 1);
    }
    if (!held?.allowed) {
      // Whatever the page asks for while it closes is aborted, and so is what it asked for before.
      this.held.end(page);
      await page.close();
      return false;
    }
    const request = held.request;
    if (request.method() !== 'GET') {
      // A form sent to a new window: send the same method and body again, once.
      await page.route(
        request.url(),
        (route) =>
          this.held.isEnded(page)
            ? route.abort('aborted')
            : route.continue({ method: request.method(), postData: request.postDataBuffer() ?? undefined }),
        { times: 1 },
      );
    }
    const referer = request.headers().referer;
    await page.goto(request.url(), { waitUntil: 'commit', ...(referer ? { referer } : {}) });
    return true;
  }
}

/** Issue 14: a new page of the context, and whether the fence keeps it (see {@link ContextFence.onNewPage}). */
export type NewPageListener = (page: Page, kept: Promise<boolean>) => void;

/** The page a request belongs to; null for a new page's first navigation, undefined for a worker's. */
function pageOf(request: Request): RequestPage {
  if (request.serviceWorker()) return undefined;
  try {
    return request.frame().page();
  } catch {
    return null;
  }
}
