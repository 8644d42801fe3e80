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

/**
 * Blocks top-level navigations to origins outside the allowed list before their request leaves
 * (DESIGN §6): typed, redirected and script-started alike. Playwright's routing sees only the
 * first hop of a redirect, so the guard pauses every main-frame document request — each redirect
 * hop included — through the DevTools Fetch domain and fails the disallowed ones.
 */
export class OriginGuard {
  private blocked = 0;
  private closed = false;

  private constructor(
    private readonly session: CDPSession,
    private readonly mainFrameId: string,
    private readonly allowed: ReadonlySet<string>,
  ) {}

  static async install(page: Page, allowed: ReadonlySet<string>): Promise<OriginGuard> {
    const session = await page.context().newCDPSession(page);
    const tree = await session.send('Page.getFrameTree');
    const guard = new OriginGuard(session, tree.frameTree.frame.id, allowed);
    session.on('Fetch.requestPaused', (event) => {
      guard.decide(event.requestId, event.request.url, event.frameId);
    });
    await session.send('Fetch.enable', {
      patterns: [{ urlPattern: '*', resourceType: 'Document', requestStage: 'Request' }],
    });
    return guard;
  }

  /** How many navigations were blocked so far; a change across a call means it hit the guard. */
  get blockedCount(): number {
    return this.blocked;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.session.detach().catch(() => undefined);
  }

  private decide(requestId: string, url: string, frameId: string): void {
    const topLevel = frameId === this.mainFrameId;
    if (topLevel && !originAllowed(url, this.allowed)) {
      this.blocked += 1;
      // Aborted, not BlockedByClient: the page stays on its document instead of an error page.
      this.session.send('Fetch.failRequest', { requestId, errorReason: 'Aborted' }).catch(() => undefined);
      return;
    }
    this.session.send('Fetch.continueRequest', { requestId }).catch(() => undefined);
  }
}
