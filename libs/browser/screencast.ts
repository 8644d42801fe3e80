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
 * when it switches. Chromium paints a frame when the page changes; the cast hands on at most
 * {@link SCREENCAST_MAX_FPS} frames a second, the newest of those that came between, none while the
 * page does not change, and nothing at all once {@link stop} ran. It runs only while someone
 * watches: the caller starts it for its first viewer and stops it after its last.
 */
export class TabScreencast {
  #session: CDPSession | undefined;
  #attaching: Promise<void> = Promise.resolve();
  /** The newest frame not yet sent, held for its turn, and the timer that sends it. */
  #held: ScreencastFrame | undefined;
  #heldTimer: NodeJS.Timeout | undefined;
  #lastSentAtMs = 0;
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
      // Acknowledged at once. Chromium holds back paints while two frames wait for theirs and
      // drops them, and a still page does not paint again: pacing the stream by the acknowledgement
      // left the view on the page as it was during a burst (typing, a form's submission) for good.
      session.send('Page.screencastFrameAck', { sessionId: event.sessionId }).catch(() => undefined);
      this.#offer({
        jpeg: event.data,
        url: page.url(),
        tab,
        width: event.metadata.deviceWidth,
        height: event.metadata.deviceHeight,
      });
    });
    await session.send('Page.startScreencast', {
      format: 'jpeg',
      quality: SCREENCAST_JPEG_QUALITY,
      maxWidth: SCREENCAST_MAX_WIDTH,
      maxHeight: SCREENCAST_MAX_HEIGHT,
      everyNthFrame: 1,
    });
  }

  /**
   * Sends a frame now if the last went at least a frame's interval ago; else holds it, in place of
   * any held before it, and sends the newest when its turn comes: the view never ends on a stale frame.
   */
  #offer(frame: ScreencastFrame): void {
    const waitMs = this.#lastSentAtMs + 1_000 / SCREENCAST_MAX_FPS - Date.now();
    if (waitMs <= 0 && this.#heldTimer === undefined) {
      this.#send(frame);
      return;
    }
    this.#held = frame;
    this.#heldTimer ??= setTimeout(
      () => {
        this.#heldTimer = undefined;
        const held = this.#held;
        this.#held = undefined;
        if (held && this.#session) this.#send(held);
      },
      Math.max(0, waitMs),
    );
  }

  #send(frame: ScreencastFrame): void {
    this.#lastSentAtMs = Date.now();
    this.onFrame(frame);
  }

  async #detach(): Promise<void> {
    clearTimeout(this.#heldTimer);
    this.#heldTimer = undefined;
    this.#held = undefined;
    const session = this.#session;
    this.#session = undefined;
    if (!session) return;
    await session.send('Page.stopScreencast').catch(() => undefined);
    await session.detach().catch(() => undefined);
  }
}
