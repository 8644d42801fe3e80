import type { Browser, CDPSession } from 'playwright-core';

/** A document request paused at the browser, named by the target that asked for it. */
export interface PausedDocument {
  readonly url: string;
  /** The page or out-of-process frame whose document it would be. */
  readonly targetId: string;
  readonly type: 'page' | 'iframe';
}

/** A context's answer: let it go, or fail it with a DevTools error reason. */
export type DocumentVerdict = 'continue' | { fail: 'Aborted' | 'BlockedByClient' };

export type DocumentJudge = (document: PausedDocument) => DocumentVerdict;

interface TargetOf {
  contextId: string;
  type: 'page' | 'iframe';
}

/** Known frames and targets (negative answers too) at most; past it the cache starts again. */
const KNOWN_LIMIT = 4_096;

/**
 * Every document request of the browser — a page's, a new tab's first one before Playwright names
 * the page, an out-of-process frame's, each redirect hop — paused at the browser target itself
 * (DevTools' Fetch domain there sees every target, as no page's own session can see a tab that
 * does not exist yet) and answered by the fence of the context it belongs to. Only documents: a
 * subresource never waits on Node here (the context's egress door judges those).
 *
 * A document of a target in no registered context, and one of a child frame that shares its
 * parent's process (no target of its own: its page's own guard answers it), is let go here.
 */
export class BrowserDocuments {
  private static readonly started = new WeakMap<Browser, Promise<BrowserDocuments>>();
  private readonly judges = new Map<string, DocumentJudge>();
  private readonly known = new Map<string, TargetOf | null>();

  private constructor(private readonly session: CDPSession) {}

  /** The browser's one instance, started on first use; it lives as long as the browser. */
  static of(browser: Browser): Promise<BrowserDocuments> {
    let started = BrowserDocuments.started.get(browser);
    if (!started) {
      started = BrowserDocuments.start(browser);
      BrowserDocuments.started.set(browser, started);
      started.catch(() => BrowserDocuments.started.delete(browser));
    }
    return started;
  }

  private static async start(browser: Browser): Promise<BrowserDocuments> {
    const session = await browser.newBrowserCDPSession();
    const documents = new BrowserDocuments(session);
    session.on('Fetch.requestPaused', (event) => {
      void documents.paused(event.requestId, event.request.url, event.frameId);
    });
    await session.send('Fetch.enable', {
      patterns: [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }],
    });
    return documents;
  }

  /**
   * Hands the documents of browser context `contextId` to `judge` until the returned function is
   * called. Unregister only once the context is closed: a document paused meanwhile is then let go.
   */
  register(contextId: string, judge: DocumentJudge): () => void {
    this.judges.set(contextId, judge);
    return () => {
      if (this.judges.get(contextId) === judge) this.judges.delete(contextId);
    };
  }

  private async paused(requestId: string, url: string, frameId: string): Promise<void> {
    let verdict: DocumentVerdict = 'continue';
    try {
      const target = await this.targetOf(frameId);
      const judge = target ? this.judges.get(target.contextId) : undefined;
      if (target && judge) verdict = judge({ url, targetId: frameId, type: target.type });
    } catch {
      verdict = { fail: 'Aborted' };
    }
    if (verdict === 'continue') {
      await this.session.send('Fetch.continueRequest', { requestId }).catch(() => undefined);
      return;
    }
    await this.session
      .send('Fetch.failRequest', { requestId, errorReason: verdict.fail })
      .catch(() => undefined);
  }

  /** The target a frame id names (a page's main frame or an out-of-process frame); null for any other frame. */
  private async targetOf(frameId: string): Promise<TargetOf | null> {
    const known = this.known.get(frameId);
    if (known !== undefined) return known;
    const info = await this.session
      .send('Target.getTargetInfo', { targetId: frameId })
      .then(({ targetInfo }) => targetInfo)
      .catch(() => undefined);
    const target: TargetOf | null =
      info?.browserContextId && (info.type === 'page' || info.type === 'iframe')
        ? { contextId: info.browserContextId, type: info.type }
        : null;
    // A frame that is no target yet may become one (a cross-site commit): only targets are kept.
    if (target) {
      if (this.known.size >= KNOWN_LIMIT) this.known.clear();
      this.known.set(frameId, target);
    }
    return target;
  }
}
