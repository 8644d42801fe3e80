import type { CDPSession, Page } from 'playwright-core';
import type { LiveDialog } from '../contracts/index.js';

/** At most this many frames a second: the next frame is asked for no sooner than this after the last. */
export const SCREENCAST_MAX_FPS = 10;
/** JPEG quality of the live view's frames: enough to read a page, far below a screenshot's bytes. */
export const SCREENCAST_JPEG_QUALITY = 60;
/** Frames are scaled down to fit this box (CSS pixels of a usual viewport stay as they are). */
export const SCREENCAST_MAX_WIDTH = 1_280;
export const SCREENCAST_MAX_HEIGHT = 1_024;

/** One frame of the current tab, as DevTools painted it. */
export interface ScreencastFrame {
  /** Base64 JPEG, as DevTools gives it (the stream sends it on unchanged). */
  jpeg: string;
  url: string;
  /** A number of the tab it shows: it changes when another tab becomes current. */
  tab: number;
  /** The page's viewport in CSS pixels. */
  width: number;
  height: number;
}

/** What a screencast follows: the lease's current tab, and word when another becomes current. */
export interface CurrentTab {
  readonly page: Page;
  onTabSwitch(listener: () => void): () => void;
  /**
   * The current tab's open dialog, which no frame paints (null: none). Optional: a tab without it
   * shows no dialogs.
   */
  dialog?(): LiveDialog['dialog'];
  /** Tells `listener` when the current tab's dialog opens or is answered, or the tab switches. */
  onDialogChange?(listener: () => void): () => void;
}

interface ScreencastFrameEvent {
  data: string;
  sessionId: number;
  metadata: { deviceWidth: number; deviceHeight: number };
}

const tabNumbers = new WeakMap<Page, number>();
let lastTabNumber = 0;

function tabNumber(page: Page): number {
  let number = tabNumbers.get(page);
  if (number === undefined) {
    lastTabNumber += 1;
    number = lastTabNumber;
    tabNumbers.set(page, number);
  }
  return number;
}

/**
 * A DevTools screencast (`Page.startScreencast`) of the lease's current tab, moved to the new tab
 * when it switches. Chromium sends the next frame only once the last is acknowledged, so pacing the
 * acknowledgement paces the stream: at most {@link SCREENCAST_MAX_FPS} frames a second, none while
 * the page does not change, and nothing at all once {@link stop} ran. It runs only while someone
 * watches: the caller starts it for its first viewer and stops it after its last.
 */
export class TabScreencast {
  #session: CDPSession | undefined;
  #attaching: Promise<void> = Promise.resolve();
  #ackTimer: NodeJS.Timeout | undefined;
  #lastFrameAtMs = 0;
  #stopped = false;
  readonly #unfollow: () => void;

  constructor(
    private readonly tabs: CurrentTab,
    private readonly onFrame: (frame: ScreencastFrame) => void,
  ) {
    this.#unfollow = tabs.onTabSwitch(() => this.#follow());
    this.#follow();
  }

  /** Stops the screencast and detaches its DevTools session. Idempotent. */
  async stop(): Promise<void> {
    if (this.#stopped) return this.#attaching;
    this.#stopped = true;
    this.#unfollow();
    await this.#attaching;
    await this.#detach();
  }

  #follow(): void {
    this.#attaching = this.#attaching.then(async () => {
      await this.#detach();
      if (this.#stopped) return;
      await this.#attach(this.tabs.page).catch(() => undefined);
    });
  }

  async #attach(page: Page): Promise<void> {
    if (page.isClosed()) return;
    const session = await page.context().newCDPSession(page);
    this.#session = session;
    const tab = tabNumber(page);
    session.on('Page.screencastFrame', (event: ScreencastFrameEvent) => {
      if (this.#session !== session) return;
      const nowMs = Date.now();
      const waitMs = Math.max(0, this.#lastFrameAtMs + 1_000 / SCREENCAST_MAX_FPS - nowMs);
      this.#lastFrameAtMs = nowMs + waitMs;
      this.onFrame({
        jpeg: event.data,
        url: page.url(),
        tab,
        width: event.metadata.deviceWidth,
        height: event.metadata.deviceHeight,
      });
      clearTimeout(this.#ackTimer);
      this.#ackTimer = setTimeout(() => {
        if (this.#session === session)
          session.send('Page.screencastFrameAck', { sessionId: event.sessionId }).catch(() => undefined);
      }, waitMs);
    });
    await session.send('Page.startScreencast', {
      format: 'jpeg',
      quality: SCREENCAST_JPEG_QUALITY,
      maxWidth: SCREENCAST_MAX_WIDTH,
      maxHeight: SCREENCAST_MAX_HEIGHT,
      everyNthFrame: 1,
    });
  }

  async #detach(): Promise<void> {
    clearTimeout(this.#ackTimer);
    const session = this.#session;
    this.#session = undefined;
    if (!session) return;
    await session.send('Page.stopScreencast').catch(() => undefined);
    await session.detach().catch(() => undefined);
  }
}
