import type { CDPSession, Page } from 'playwright-core';

/**
 * Chromium's own word that a page is opening a window (`Page.windowOpen`: a `target=_blank` link,
 * `window.open`, a form sent to a new window). The renderer says it while it handles the click, so
 * it reaches us before the act's settle ends even when Playwright names the new page seconds later
 * on a busy machine: the act that opened a tab knows to wait for it. Never throws: a page whose
 * session cannot be had announces nothing (Playwright's own page event still does).
 */
export class WindowOpens {
  private listener: (() => void) | undefined;

  private constructor(private readonly session: CDPSession | null) {}

  static async watch(page: Page): Promise<WindowOpens> {
    try {
      const session = await page.context().newCDPSession(page);
      const opens = new WindowOpens(session);
      session.on('Page.windowOpen', () => opens.listener?.());
      await session.send('Page.enable');
      return opens;
    } catch {
      return new WindowOpens(null);
    }
  }

  /** One listener, told once per window the page opens. */
  onOpen(listener: () => void): void {
    this.listener = listener;
  }

  async close(): Promise<void> {
    this.listener = undefined;
    await this.session?.detach().catch(() => undefined);
  }
}
