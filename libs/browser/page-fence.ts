import type { BrowserContext, Frame, Page, Request, WebSocketRoute } from 'playwright-core';
import { BrowserDocuments, type DocumentVerdict, type PausedDocument } from './document-fence.js';
import {
  type BlockedKind,
  type FencePolicy,
  fenceAllows,
  normalizeOrigins,
  OriginGuard,
} from './origin-guard.js';

/** The profile's settings a fence is built from. */
export interface FenceOptions {
  allowedOrigins: readonly string[];
  /** Origins child frames may load besides the allowed ones (payment or sign-in embeds); none by default. */
  frameOrigins?: readonly string[] | undefined;
  /** `allowed_origins` restricts subresources to allowed ∪ frame origins; `any` (the default) does not. */
  subresources?: 'any' | 'allowed_origins' | undefined;
  /**
   * The context's egress door (the browser worker's proxy, one listener per context), which
   * judges its subresources by origin; its refusals count as the fence's. Without one the fence
   * pauses the subresources itself when the profile restricts them.
   */
  egressDoor?: { refused(): number } | undefined;
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

/**
 * Fences every page and frame of one browser context — the lease's first page, popups, new tabs,
 * child frames and (when the profile says so) subresources — before their first request leaves
 * (11.3), without a round trip through Node for any subresource:
 *
 * - documents of every page and out-of-process frame, a new tab's first one included, are paused
 *   at the browser ({@link BrowserDocuments}) and judged here; a new page whose first document is
 *   refused is closed;
 * - documents of same-process child frames, and redirect hops, are paused on each page's own
 *   target by its {@link OriginGuard}, which holds each out-of-process frame at its start until
 *   that frame's own documents are paused too;
 * - subresources are judged by origin in the context's egress door when it has one; without one,
 *   and when the profile restricts them, by the guards too.
 *
 * A paused document is answered by the fence alone, and never let go by a removal: detaching a
 * guard's DevTools session continues whatever it paused, unfenced. So once the fence stops, every
 * document paused or pausing is failed; {@link close} closes the context before it removes
 * anything.
 */
export class ContextFence {
  private readonly guards = new Map<Page, Promise<OriginGuard>>();
  private readonly pending = new Set<Promise<unknown>>();
  private readonly counts: BlockedCounts = { navigation: 0, popup: 0, frame: 0, subresource: 0 };
  /** Targets a document of which was let through: a refused document of any other page is its first. */
  private readonly shown = new Set<string>();
  /** Targets whose latest document was refused (a redirect hop, say). */
  private readonly lastRefused = new Set<string>();
  /** Told when a target's document is refused (a new page waiting for its first commit). */
  private readonly refusals = new Map<string, () => void>();
  /** Targets of the pages Playwright named and the fence guards. */
  private readonly known = new Set<string>();
  /** New pages closed because their first document was refused. */
  private readonly refusedFirst = new Set<string>();
  /** Pages that crashed or that the fence closes: whatever they ask is failed. */
  private readonly ended = new WeakSet<Page>();
  private stopped = false;
  private ending: Promise<void> | undefined;
  private unregister: (() => void) | undefined;
  /** Whose blocked top-level navigations fail the call (`navigation`) rather than count as `popup`. */
  private current: Page;
  private currentTarget: string | null = null;
  private pageListener: NewPageListener | undefined;
  private readonly onPage = (page: Page) => {
    const adopted = this.adopt(page);
    this.track(adopted);
    this.pageListener?.(
      page,
      adopted.catch(() => false),
    );
  };
  private readonly onWebSocket = (socket: WebSocketRoute) => this.webSocket(socket);

  private constructor(
    private readonly context: BrowserContext,
    primary: Page,
    readonly policy: FencePolicy,
    private readonly door: FenceOptions['egressDoor'],
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
    const browser = context.browser();
    if (browser === null) throw new Error('a fenced context belongs to a launched browser');
    const fence = new ContextFence(context, primary, compileFencePolicy(options), options.egressDoor);
    const documents = await BrowserDocuments.of(browser);
    const guard = await fence.guard(primary);
    if (guard.contextId === null) throw new Error('the page target named no browser context');
    fence.currentTarget = guard.targetId;
    fence.unregister = documents.register(guard.contextId, (document) => fence.judge(document));
    context.on('page', fence.onPage);
    // WebSockets pass neither the Fetch domain nor, without a door, any other check; Playwright's
    // WebSocket routing replaces the page's constructor. Defence in depth only: page code holding
    // a constructor from a realm it made before the replacement could still connect (README,
    // Security). A door sees every WebSocket's connection instead.
    if (fence.subresourcesHere) await context.routeWebSocket(/.*/, fence.onWebSocket);
    return fence;
  }

  /** Whether the guards judge subresources: the profile restricts them and no egress door does. */
  private get subresourcesHere(): boolean {
    return this.policy.subresources !== null && this.door === undefined;
  }

  /**
   * The page the lease now observes and acts on (its current tab). Its blocked top-level
   * navigations count as `navigation`; every other page's as `popup`.
   */
  follow(page: Page): void {
    this.current = page;
    void this.guards
      .get(page)
      ?.then((guard) => {
        if (this.current === page) this.currentTarget = guard.targetId;
      })
      .catch(() => undefined);
  }

  /**
   * Told of every new page of the context as it appears, with whether the fence kept it —
   * true once it is guarded and its first document (if it asked for one) committed; false when it
   * was closed for its origin or that document failed. One listener; never rejects.
   */
  onNewPage(listener: NewPageListener): void {
    this.pageListener = listener;
  }

  /** A snapshot of the blocked counts; the egress door's refusals are the subresources'. */
  blocked(): BlockedCounts {
    const refused = this.door?.refused() ?? 0;
    return { ...this.counts, subresource: this.counts.subresource + refused };
  }

  /** Guards `page`'s own target; idempotent, and in place before the page is adopted. */
  guard(page: Page): Promise<OriginGuard> {
    let guard = this.guards.get(page);
    if (!guard) {
      let target: string | null = null;
      guard = OriginGuard.install(
        page,
        this.policy,
        (kind) => {
          this.count(kind, page);
          if (kind === 'navigation' && target !== null) this.refused(target);
        },
        () => this.isEnded(page),
        this.subresourcesHere,
      );
      void guard.then(
        (installed) => {
          target = installed.targetId;
          this.known.add(target);
        },
        () => undefined,
      );
      this.guards.set(page, guard);
      guard.catch(() => this.guards.delete(page));
      // A crashed page's paused documents are failed, not left for a detach to let go.
      page.once('crash', () => this.ended.add(page));
      page.once('close', () => {
        this.guards.delete(page);
        guard?.then((installed) => installed.close()).catch(() => undefined);
      });
    }
    return guard;
  }

  /**
   * A document paused at the browser: a page's (the current one's blocked navigation fails its
   * call; another page's counts as a popup, and a new page whose first document is refused is
   * closed) or an out-of-process frame's.
   */
  private judge(document: PausedDocument): DocumentVerdict {
    if (this.stopped) return { fail: 'Aborted' };
    const kind = document.type === 'page' ? 'page' : 'frame';
    if (fenceAllows(this.policy, kind, document.url)) {
      this.shown.add(document.targetId);
      this.lastRefused.delete(document.targetId);
      return 'continue';
    }
    this.refused(document.targetId);
    if (kind === 'frame') {
      this.counts.frame += 1;
      return { fail: 'Aborted' };
    }
    if (document.targetId === this.currentTarget) {
      this.counts.navigation += 1;
      // Aborted, not BlockedByClient: a blocked navigation leaves the page on its document.
      return { fail: 'Aborted' };
    }
    this.counts.popup += 1;
    if (this.known.has(document.targetId)) return { fail: 'Aborted' };
    // A page Playwright has not named yet: BlockedByClient commits an error page, which is what
    // makes Playwright name it, and the page is closed once it is.
    this.refusedFirst.add(document.targetId);
    return { fail: 'BlockedByClient' };
  }

  private refused(target: string): void {
    this.lastRefused.add(target);
    this.refusals.get(target)?.();
  }

  /**
   * Whether a new page's main frame commits the document it asked for: false when that navigation
   * fails or a hop of it is refused (a redirect elsewhere), or the page closes first.
   */
  private firstCommit(page: Page, target: string): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      const finish = (committed: boolean) => {
        page.off('framenavigated', navigated);
        page.off('requestfailed', failed);
        page.off('close', closed);
        this.refusals.delete(target);
        resolve(committed);
      };
      const navigated = (frame: Frame) => {
        if (frame === page.mainFrame()) finish(true);
      };
      const failed = (request: Request) => {
        if (request.isNavigationRequest() && request.frame() === page.mainFrame()) finish(false);
      };
      const closed = () => finish(false);
      page.on('framenavigated', navigated);
      page.on('requestfailed', failed);
      page.once('close', closed);
      this.refusals.set(target, () => finish(false));
      // What happened before the listeners were on.
      if (page.isClosed() || this.lastRefused.has(target)) finish(false);
      else if (page.url() !== 'about:blank') finish(true);
    });
  }

  /**
   * Ends the context for good (a lease's close, its expiry, its revocation): every document paused
   * or pausing from now on is failed; the context is closed, every page with it; only then is the
   * context let go at the browser and the guards' sessions detached — either, while a page could
   * still send, would let its paused documents go unfenced. Idempotent.
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
   * For a caller that keeps the pages (a benchmark's unfenced floor): every document paused is
   * failed, then the guards are removed, and the pages go on unfenced. Idempotent.
   */
  release(): Promise<void> {
    this.ending ??= (async () => {
      this.stop();
      await this.remove();
    })();
    return this.ending;
  }

  /** From now on every document paused (at the browser or by a guard) is failed. */
  private stop(): void {
    this.stopped = true;
    this.context.off('page', this.onPage);
  }

  private isEnded(page: Page): boolean {
    return this.stopped || this.ended.has(page);
  }

  private async remove(): Promise<void> {
    this.unregister?.();
    await Promise.allSettled([...this.pending]);
    const guards = await Promise.allSettled([...this.guards.values()]);
    this.guards.clear();
    for (const guard of guards) if (guard.status === 'fulfilled') await guard.value.close();
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
   * Guards a new page. True when the page stays: guarded and, when its first document was let
   * through, committed on it; false when its first document was refused (the page is closed), a
   * hop of it was, or the page closed first.
   */
  private async adopt(page: Page): Promise<boolean> {
    const guard = await this.guard(page);
    const target = guard.targetId;
    // Its first document was let through: the page is kept once it commits, not if a later hop
    // of it was refused or it failed.
    const committed =
      this.shown.has(target) && !this.refusedFirst.has(target) && page.url() === 'about:blank'
        ? await this.firstCommit(page, target)
        : true;
    if (this.refusedFirst.has(target)) {
      // Whatever the page asks for while it closes is failed.
      this.ended.add(page);
      await page.close();
      return false;
    }
    if (!committed) return false;
    return !page.isClosed();
  }
}

/** A new page of the context, and whether the fence keeps it (see {@link ContextFence.onNewPage}). */
export type NewPageListener = (page: Page, kept: Promise<boolean>) => void;
