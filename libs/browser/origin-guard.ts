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
 * One target's document fence: it pauses the documents of its target through the DevTools Fetch
 * domain on the target's own session — redirect hops included — and fails the disallowed ones:
 * documents of the main frame and of same-process child frames, which have no target of their own
 * and so are judged here rather than at the browser (document-fence.ts). When no egress door
 * judges the context's subresources and the profile restricts them, it pauses those too.
 */
export class OriginGuard {
  private closed = false;

  private constructor(
    private readonly session: CDPSession,
    /** The target's root frame when it is a page's main frame; null for an out-of-process frame. */
    private readonly mainFrameId: string | null,
    /** The browser context of a page's target (its DevTools id); null for a frame's. */
    readonly contextId: string | null,
    private readonly policy: FencePolicy,
    private readonly onBlocked: (kind: BlockedKind) => void,
    private readonly stopped: () => boolean,
  ) {}

  /**
   * Guards the target of `target`: a page, or a child frame in a process of its own (whose
   * documents are all frames' documents). Throws for a frame that shares its parent's target.
   * Once `stopped` answers true (its page is being closed) every paused request is failed.
   * `subresources`: the guard judges subresources too (nothing else does).
   */
  static async install(
    target: Page | Frame,
    policy: FencePolicy,
    onBlocked: (kind: BlockedKind) => void,
    stopped: () => boolean,
    subresources: boolean,
  ): Promise<OriginGuard> {
    const page = 'page' in target ? target.page() : target;
    const session = await page.context().newCDPSession(target);
    // Only a page's target needs its root frame named, and a page target's id is its main frame's.
    // Asked of the target, not the renderer: a renderer does not answer Page.getFrameTree while
    // its navigation is paused, and a popup sent cross-site from about:blank is guarded just then.
    const info = target === page ? (await session.send('Target.getTargetInfo')).targetInfo : null;
    const guard = new OriginGuard(
      session,
      info?.targetId ?? null,
      info?.browserContextId ?? null,
      policy,
      onBlocked,
      stopped,
    );
    session.on('Fetch.requestPaused', (event) => {
      guard.decide(event.requestId, event.request.url, event.frameId, event.resourceType);
    });
    const patterns = subresources
      ? [{ urlPattern: '*', requestStage: 'Request' as const }]
      : [{ urlPattern: '*', resourceType: 'Document' as const, requestStage: 'Request' as const }];
    await session.send('Fetch.enable', { patterns });
    return guard;
  }

  /** The page's target id (its main frame's); null for a frame's guard. */
  get targetId(): string | null {
    return this.mainFrameId;
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
