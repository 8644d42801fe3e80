import type { CDPSession, Page } from 'playwright-core';

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

/** What the profile lets a lease's pages reach (pages, frames, subresources). */
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

/** One DevTools session of a guard's tree: the page's own, or an out-of-process frame's inside it. */
interface Channel {
  send(method: string, params?: object): Promise<unknown>;
}

type ChannelEvent = (method: string, params: Record<string, unknown>) => void;

/**
 * A page's document fence: it pauses the documents of the page's target through the DevTools
 * Fetch domain on a session of its own — redirect hops included — and fails the disallowed ones:
 * documents of the main frame and of same-process child frames, which have no target of their own
 * and so are judged here rather than at the browser (document-fence.ts). Every out-of-process
 * frame of the page is attached to the same session as it starts and held there (Chromium waits
 * for the debugger) until its own Fetch is on, so no frame of the page, however deep, sends a
 * document unseen. When no egress door judges the context's subresources and the profile
 * restricts them, the guard pauses those too.
 */
export class OriginGuard {
  private closed = false;

  private constructor(
    private readonly session: CDPSession,
    /** The page's target id, its main frame's. */
    readonly targetId: string,
    /** The browser context of the page's target (its DevTools id). */
    readonly contextId: string | null,
    private readonly policy: FencePolicy,
    private readonly onBlocked: (kind: BlockedKind) => void,
    private readonly stopped: () => boolean,
    private readonly subresources: boolean,
  ) {}

  /**
   * Guards `page`'s target and its out-of-process frames. Once `stopped` answers true (its page is
   * being closed) every paused request is failed. `subresources`: the guard judges subresources
   * too (nothing else does).
   */
  static async install(
    page: Page,
    policy: FencePolicy,
    onBlocked: (kind: BlockedKind) => void,
    stopped: () => boolean,
    subresources: boolean,
  ): Promise<OriginGuard> {
    const session = await page.context().newCDPSession(page);
    // Asked of the target, not the renderer: a renderer does not answer Page.getFrameTree while
    // its navigation is paused, and a popup sent cross-site from about:blank is guarded just then.
    const { targetInfo } = await session.send('Target.getTargetInfo');
    const guard = new OriginGuard(
      session,
      targetInfo.targetId,
      targetInfo.browserContextId ?? null,
      policy,
      onBlocked,
      stopped,
      subresources,
    );
    const root: Channel = {
      send: (method, params) => session.send(method as 'Fetch.enable', params as never),
    };
    const relay = guard.relay(root, true);
    session.on('Fetch.requestPaused', (event) => relay('Fetch.requestPaused', event as never));
    session.on('Target.attachedToTarget', (event) => relay('Target.attachedToTarget', event as never));
    session.on('Target.receivedMessageFromTarget', (event) =>
      relay('Target.receivedMessageFromTarget', event as never),
    );
    await guard.arm(root);
    return guard;
  }

  /**
   * Detaches the session, and with it every frame's. Detaching (as disabling Fetch) lets a
   * request paused on it go on unfenced, so a guard of a live page is closed only once its page is
   * closed (see ContextFence.close); until the detach is done, whatever pauses is failed.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.detach().catch(() => undefined);
  }

  /** Turns a session's Fetch on and has its out-of-process frames attached, held until guarded. */
  private async arm(channel: Channel): Promise<void> {
    const patterns = this.subresources
      ? [{ urlPattern: '*', requestStage: 'Request' }]
      : [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }];
    await channel.send('Fetch.enable', { patterns });
    // Not flattened: Playwright's own connection delivers no message of a session it did not make,
    // so a frame's session is spoken to through this one (Target.sendMessageToTarget).
    await channel.send('Target.setAutoAttach', {
      autoAttach: true,
      waitForDebuggerOnStart: true,
      flatten: false,
      filter: [{ type: 'iframe' }],
    });
  }

  /** What a channel's events do: paused requests are judged, frames attached are guarded. */
  private relay(channel: Channel, isPage: boolean): ChannelEvent {
    const children = new Map<string, ChannelEvent>();
    return (method, params) => {
      if (method === 'Fetch.requestPaused') {
        const request = params.request as { url: string };
        this.decide(
          channel,
          params.requestId as string,
          request.url,
          isPage && params.frameId === this.targetId,
          params.resourceType as string,
        );
        return;
      }
      if (method === 'Target.attachedToTarget') {
        const sessionId = params.sessionId as string;
        const child = this.child(channel, sessionId);
        children.set(sessionId, child.relay);
        void this.guardFrame(child.channel);
        return;
      }
      if (method === 'Target.receivedMessageFromTarget') {
        children.get(params.sessionId as string)?.('message', params);
      }
    };
  }

  /** A frame's session inside `parent`: its replies and events arrive wrapped in the parent's. */
  private child(parent: Channel, sessionId: string): { channel: Channel; relay: ChannelEvent } {
    let nextId = 0;
    const replies = new Map<number, { resolve: (value: unknown) => void; reject: (error: Error) => void }>();
    const channel: Channel = {
      send: (method, params = {}) => {
        nextId += 1;
        const id = nextId;
        const answered = new Promise<unknown>((resolve, reject) => replies.set(id, { resolve, reject }));
        parent
          .send('Target.sendMessageToTarget', { sessionId, message: JSON.stringify({ id, method, params }) })
          .catch((error: Error) => {
            replies.get(id)?.reject(error);
            replies.delete(id);
          });
        return answered;
      },
    };
    const events = this.relay(channel, false);
    return {
      channel,
      relay: (_method, params) => {
        const message = JSON.parse(params.message as string) as {
          id?: number;
          method?: string;
          params?: Record<string, unknown>;
          error?: { message: string };
        };
        if (message.id !== undefined) {
          const reply = replies.get(message.id);
          replies.delete(message.id);
          if (message.error) reply?.reject(new Error(message.error.message));
          else reply?.resolve(message);
          return;
        }
        if (message.method) events(message.method, message.params ?? {});
      },
    };
  }

  /** Guards a frame held at its start, then lets it run; a frame that cannot be guarded is never let run. */
  private async guardFrame(channel: Channel): Promise<void> {
    try {
      await this.arm(channel);
    } catch {
      return;
    }
    await channel.send('Runtime.runIfWaitingForDebugger').catch(() => undefined);
  }

  private decide(
    channel: Channel,
    requestId: string,
    url: string,
    mainFrame: boolean,
    resourceType: string,
  ): void {
    const kind = resourceType !== 'Document' ? 'subresource' : mainFrame ? 'page' : 'frame';
    if (this.closed || this.stopped()) {
      channel.send('Fetch.failRequest', { requestId, errorReason: 'Aborted' }).catch(() => undefined);
      return;
    }
    if (!fenceAllows(this.policy, kind, url)) {
      this.onBlocked(kind === 'page' ? 'navigation' : kind);
      // Aborted, not BlockedByClient: a blocked page stays on its document instead of an error page.
      const errorReason = kind === 'subresource' ? 'BlockedByClient' : 'Aborted';
      channel.send('Fetch.failRequest', { requestId, errorReason }).catch(() => undefined);
      return;
    }
    channel.send('Fetch.continueRequest', { requestId }).catch(() => undefined);
  }
}
