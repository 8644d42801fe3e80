import type { CDPSession, Frame, Page } from 'playwright-core';

/** An origin as the allowed list holds it (`https://example.com`); null for a URL without one. */
export function originOf(url: string): string | null {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return null;
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return null;
  return parsed.origin;
}

/** Normalizes the allowed list; a value that is not an http(s) origin is a configuration error. */
export function normalizeOrigins(origins: readonly string[]): ReadonlySet<string> {
  const normalized = new Set<string>();
  for (const origin of origins) {
    const value = originOf(origin);
    if (value === null) throw new Error(`allowed origin "${origin}" is not an http(s) origin`);
    normalized.add(value);
  }
  return normalized;
}

export function originAllowed(url: string, allowed: ReadonlySet<string>): boolean {
  const origin = originOf(url);
  return origin !== null && allowed.has(origin);
}

/** What the profile lets a lease's pages reach (issue 11: pages, frames, subresources). */
export interface FencePolicy {
  /** Top-level documents: the profile's allowed origins. */
  readonly pages: ReadonlySet<string>;
  /** Child frames' documents: allowed ∪ `frame_origins`. */
  readonly frames: ReadonlySet<string>;
  /** Subresources: null for any origin (the default), else allowed ∪ `frame_origins`. */
  readonly subresources: ReadonlySet<string> | null;
}

export type BlockedKind = 'navigation' | 'popup' | 'frame' | 'subresource';

/** The request kinds a fence tells apart; `popup` is a new page's first navigation. */
export function fenceAllows(
  policy: FencePolicy,
  kind: 'page' | 'frame' | 'subresource',
  url: string,
): boolean {
  switch (kind) {
    case 'page':
      return originAllowed(url, policy.pages);
    case 'frame':
      return originAllowed(url, policy.frames);
    case 'subresource':
      // Requests that never leave the browser (data:, blob:) have no origin to fence.
      if (policy.subresources === null || /^(data|blob):/i.test(url)) return true;
      return originAllowed(url, policy.subresources);
    default: {
      const unknown: never = kind;
      throw new Error(`unknown request kind ${String(unknown)}`);
    }
  }
}

/**
 * One page's redirect fence. Playwright's routing (the context fence, page-fence.ts) decides the
 * first hop of every request but continues redirect hops on its own, so this guard pauses each
 * hop through the DevTools Fetch domain on the page's own target and fails the disallowed ones:
 * documents of the main frame and of same-process child frames, and — when the profile restricts
 * them — subresources. Requests of out-of-process (cross-origin) frames belong to other targets
 * and are fenced on their first hop only.
 */
export class OriginGuard {
  private closed = false;

  private constructor(
    private readonly session: CDPSession,
    /** The target's root frame when it is a page's main frame; null for an out-of-process frame. */
    private readonly mainFrameId: string | null,
    private readonly policy: FencePolicy,
    private readonly onBlocked: (kind: BlockedKind) => void,
    private readonly stopped: () => boolean,
  ) {}

  /**
   * Guards the target of `target`: a page, or a child frame in a process of its own (whose
   * documents are all frames' documents). Throws for a frame that shares its parent's target.
   * Once `stopped` answers true (its page is being closed) every paused request is failed.
   */
  static async install(
    target: Page | Frame,
    policy: FencePolicy,
    onBlocked: (kind: BlockedKind) => void,
    stopped: () => boolean,
  ): Promise<OriginGuard> {
    const page = 'page' in target ? target.page() : target;
    const session = await page.context().newCDPSession(target);
    // Only a page's target needs its root frame named, and a page target's id is its main frame's.
    // Asked of the target, not the renderer: a renderer does not answer Page.getFrameTree while
    // its navigation is paused, and a popup sent cross-site from about:blank is guarded just then
    // (its navigation paused in the fence) — waiting for the renderer held both forever.
    const mainFrameId =
      target === page ? (await session.send('Target.getTargetInfo')).targetInfo.targetId : null;
    const guard = new OriginGuard(session, mainFrameId, policy, onBlocked, stopped);
    session.on('Fetch.requestPaused', (event) => {
      guard.decide(event.requestId, event.request.url, event.frameId, event.resourceType);
    });
    const patterns =
      policy.subresources === null
        ? [{ urlPattern: '*', resourceType: 'Document' as const, requestStage: 'Request' as const }]
        : [{ urlPattern: '*', requestStage: 'Request' as const }];
    await session.send('Fetch.enable', { patterns });
    return guard;
  }

  /**
   * Detaches the session. Detaching (as disabling Fetch) lets a request paused on it go on
   * unfenced, so a guard of a live page is closed only once its page is closed (see
   * ContextFence.close); until the detach is done, whatever pauses is failed.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.detach().catch(() => undefined);
  }

  private decide(requestId: string, url: string, frameId: string, resourceType: string): void {
    const kind =
      resourceType !== 'Document' ? 'subresource' : frameId === this.mainFrameId ? 'page' : 'frame';
    if (this.closed || this.stopped()) {
      this.session.send('Fetch.failRequest', { requestId, errorReason: 'Aborted' }).catch(() => undefined);
      return;
    }
    if (!fenceAllows(this.policy, kind, url)) {
      this.onBlocked(kind === 'page' ? 'navigation' : kind);
      // Aborted, not BlockedByClient: a blocked page stays on its document instead of an error page.
      const errorReason = kind === 'subresource' ? 'BlockedByClient' : 'Aborted';
      this.session.send('Fetch.failRequest', { requestId, errorReason }).catch(() => undefined);
      return;
    }
    this.session.send('Fetch.continueRequest', { requestId }).catch(() => undefined);
  }
}
