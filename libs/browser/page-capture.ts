import type { CDPSession, Page } from 'playwright-core';
import { SCREENSHOT_LIMITS } from '../contracts/index.js';
import { within } from './operation.js';

/**
 * What a capture gave: the JPEG's bytes, or why there are none: it timed out or failed, a dialog
 * held the page (it cannot paint), or the page was closed first. A capture is taken after the call
 * it follows answered and never fails it.
 */
export type Capture =
  | { ok: true; bytes: Uint8Array }
  | { ok: false; reason: 'timeout' | 'error' | 'dialog_open' | 'page_closed'; cause?: unknown };

/** Overlay colour of a preview's target: a magenta no page is likely to use for its own borders. */
export const OUTLINE_RGB = { r: 255, g: 0, b: 170 } as const;

/** A viewport rectangle in CSS pixels of the main frame. */
export interface Box {
  x: number;
  y: number;
  width: number;
  height: number;
}

/**
 * Screenshots of one page over a DevTools session of its own. JPEG of the viewport at
 * SCREENSHOT_LIMITS' quality, scaled down to fit its bounds. Straight `Page.captureScreenshot`
 * rather than Playwright's `page.screenshot`: the latter waits for fonts and injects a caret style
 * first, which measured twice the cost, and the caret style is a change to the page this capture
 * must not make. The outline of a preview is drawn by DevTools' own overlay
 * (`Overlay.highlightRect`), painted above the page and never in its DOM.
 */
export class PageCapture {
  #session: Promise<CDPSession> | undefined;
  #overlay = false;
  #maskSelector: string | null = null;

  constructor(private readonly page: Page) {}

  /**
   * DESIGN §12: from now on every capture paints the fields `selector` finds over (a run's declared
   * secret was typed into one; a username field shows its value). Playwright's `mask` draws the
   * boxes in the page for the capture's moment, which is why it is used only from then on.
   */
  mask(selector: string): void {
    this.#maskSelector = selector;
  }

  /** Whether captures are masked (an early capture, taken without the mask, is then never used). */
  get masking(): boolean {
    return this.#maskSelector !== null;
  }

  /** The viewport as it is now; `untilMs` bounds it (the browser worker's capture timeout). */
  async viewport(untilMs: number, signal?: AbortSignal): Promise<Capture> {
    if (this.#maskSelector !== null) return this.#maskedViewport(this.#maskSelector, untilMs, signal);
    try {
      const session = await this.#cdp();
      const shot = session.send('Page.captureScreenshot', {
        format: 'jpeg',
        quality: SCREENSHOT_LIMITS.quality,
        captureBeyondViewport: false,
        // Encoding is most of a capture's cost; the looser encoder measured about a quarter less.
        optimizeForSpeed: true,
        ...this.#fitted(),
      } as { format: 'jpeg' });
      const done = await within(shot, untilMs, signal);
      if (!done.done) return { ok: false, reason: 'timeout' };
      return { ok: true, bytes: Buffer.from(done.value.data, 'base64') };
    } catch (error) {
      return { ok: false, reason: 'error', cause: error };
    }
  }

  async #maskedViewport(selector: string, untilMs: number, signal?: AbortSignal): Promise<Capture> {
    const boundMs = Math.max(1, untilMs - Date.now());
    try {
      const shot = this.page.screenshot({
        type: 'jpeg',
        quality: SCREENSHOT_LIMITS.quality,
        scale: 'css',
        caret: 'initial',
        animations: 'allow',
        // Every frame's fields, not the main frame's only: a sign-in form is often embedded.
        mask: this.page.frames().map((frame) => frame.locator(selector)),
        timeout: boundMs,
      });
      shot.catch(() => undefined);
      const done = await within(shot, Date.now() + boundMs, signal);
      if (!done.done) return { ok: false, reason: 'timeout' };
      return { ok: true, bytes: done.value };
    } catch (error) {
      return { ok: false, reason: 'error', cause: error };
    }
  }

  /**
   * The viewport with `box` outlined: the overlay is drawn, captured and hidden again, so the page's
   * DOM, scroll and focus are as before.
   */
  async outlined(box: Box, untilMs: number, signal?: AbortSignal): Promise<Capture> {
    let session: CDPSession;
    try {
      session = await this.#cdp();
      if (!this.#overlay) {
        await session.send('DOM.enable');
        await session.send('Overlay.enable');
        this.#overlay = true;
      }
      const pad = 3;
      await session.send('Overlay.highlightRect', {
        x: Math.round(box.x - pad),
        y: Math.round(box.y - pad),
        width: Math.round(box.width + 2 * pad),
        height: Math.round(box.height + 2 * pad),
        color: { ...OUTLINE_RGB, a: 0.12 },
        outlineColor: { ...OUTLINE_RGB, a: 1 },
      });
    } catch (error) {
      return { ok: false, reason: 'error', cause: error };
    }
    try {
      return await this.viewport(untilMs, signal);
    } finally {
      await session.send('Overlay.hideHighlight').catch(() => undefined);
    }
  }

  async close(): Promise<void> {
    const session = this.#session;
    this.#session = undefined;
    await (await session?.catch(() => undefined))?.detach().catch(() => undefined);
  }

  #cdp(): Promise<CDPSession> {
    if (!this.#session) {
      this.#session = this.page.context().newCDPSession(this.page);
      this.#session.catch(() => {
        this.#session = undefined;
      });
    }
    return this.#session;
  }

  /** A viewport past SCREENSHOT_LIMITS is scaled down to fit them; one within is taken as it is. */
  #fitted(): { clip?: Box & { scale: number } } {
    const size = this.page.viewportSize();
    if (!size) return {};
    const scale = Math.min(
      1,
      SCREENSHOT_LIMITS.maxWidth / size.width,
      SCREENSHOT_LIMITS.maxHeight / size.height,
    );
    return scale < 1 ? { clip: { x: 0, y: 0, width: size.width, height: size.height, scale } } : {};
  }
}
