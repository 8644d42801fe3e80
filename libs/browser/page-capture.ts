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

/**
 * Runs in the page's renderer, in an isolated world: the JPEG with `box` (CSS pixels of the
 * viewport, scaled as the image was) outlined 3 px wide a few pixels outside it and lightly tinted
 * within, as JPEG again. Self-contained: it is sent as its source text.
 */
async function DRAW_OUTLINE(
  jpeg: string,
  box: { x: number; y: number; width: number; height: number },
  rgb: { r: number; g: number; b: number },
  quality: number,
): Promise<string> {
  const bytes = Uint8Array.from(atob(jpeg), (char) => char.charCodeAt(0));
  const image = await createImageBitmap(new Blob([bytes], { type: 'image/jpeg' }));
  const board = new OffscreenCanvas(image.width, image.height);
  const context = board.getContext('2d') as OffscreenCanvasRenderingContext2D;
  context.drawImage(image, 0, 0);
  const scale = image.width / Math.max(1, window.innerWidth);
  const pad = 3;
  const x = (box.x - pad) * scale;
  const y = (box.y - pad) * scale;
  const width = (box.width + 2 * pad) * scale;
  const height = (box.height + 2 * pad) * scale;
  context.fillStyle = `rgba(${rgb.r}, ${rgb.g}, ${rgb.b}, 0.12)`;
  context.fillRect(x, y, width, height);
  context.strokeStyle = `rgb(${rgb.r}, ${rgb.g}, ${rgb.b})`;
  context.lineWidth = 3;
  context.strokeRect(Math.round(x) + 0.5, Math.round(y) + 0.5, Math.round(width), Math.round(height));
  const blob = await board.convertToBlob({ type: 'image/jpeg', quality });
  const out = new Uint8Array(await blob.arrayBuffer());
  let text = '';
  for (let i = 0; i < out.length; i += 0x8000) text += String.fromCharCode(...out.subarray(i, i + 0x8000));
  return btoa(text);
}

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
 * must not make. The outline of a preview is drawn onto the captured image, never into the page.
 */
export class PageCapture {
  #session: Promise<CDPSession> | undefined;
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
   * The viewport with `box` outlined. The outline is drawn onto the captured image, not the page:
   * in a JavaScript world of this capture's own (an isolated world: the page's scripts cannot see
   * it), on a canvas never attached to the document, so the page's DOM, scroll and focus are as
   * before. DevTools' overlay would draw it without the copy, but Chromium's headless shell never
   * paints that overlay into a screenshot.
   */
  async outlined(box: Box, untilMs: number, signal?: AbortSignal): Promise<Capture> {
    const shot = await this.viewport(untilMs, signal);
    if (!shot.ok) return shot;
    try {
      const session = await this.#cdp();
      const drawn = this.#drawOutline(session, Buffer.from(shot.bytes).toString('base64'), box);
      drawn.catch(() => undefined);
      const done = await within(drawn, untilMs, signal);
      if (!done.done) return { ok: false, reason: 'timeout' };
      return { ok: true, bytes: Buffer.from(done.value, 'base64') };
    } catch (error) {
      return { ok: false, reason: 'error', cause: error };
    }
  }

  async #drawOutline(session: CDPSession, jpeg: string, box: Box): Promise<string> {
    const { frameTree } = await session.send('Page.getFrameTree');
    const { executionContextId } = await session.send('Page.createIsolatedWorld', {
      frameId: frameTree.frame.id,
      worldName: 'leasehold-capture',
    });
    const answer = await session.send('Runtime.callFunctionOn', {
      functionDeclaration: DRAW_OUTLINE.toString(),
      executionContextId,
      arguments: [
        { value: jpeg },
        { value: box },
        { value: OUTLINE_RGB },
        { value: SCREENSHOT_LIMITS.quality / 100 },
      ],
      awaitPromise: true,
      returnByValue: true,
    });
    if (answer.exceptionDetails || typeof answer.result.value !== 'string')
      throw new Error(`the outline was not drawn: ${answer.exceptionDetails?.text ?? 'no image'}`);
    return answer.result.value;
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
