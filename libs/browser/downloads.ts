import type { BrowserContext, CDPSession, Download, Page } from 'playwright-core';

/** How a download of a lease's pages ended, as the browser saw it. */
export type DownloadEnd =
  | { ok: true; path: string }
  | {
      ok: false;
      /** `too_large`: more than its limit arrived (or was announced) and it was cancelled. */
      reason: 'too_large' | 'failed';
      /** Bytes seen before it stopped (0 when not known). */
      receivedBytes: number;
    };

/**
 * One download a page started. The browser writes it to a file of its own; {@link limit} cancels it
 * as soon as more than the limit is announced or has arrived (Chromium's own progress events), so
 * a file past the limit does not fill the disk before it is refused.
 */
export interface PageDownload {
  readonly url: string;
  readonly suggestedName: string;
  readonly startedAtMs: number;
  /** Cancels the download once more than `maxBytes` is announced or has arrived. */
  limit(maxBytes: number): void;
  /** Resolves once the download ended: where its bytes are, or why there are none. */
  finished(): Promise<DownloadEnd>;
  /** Removes the browser's file (after it was kept elsewhere). */
  delete(): Promise<void>;
}

interface Progress {
  guid: string;
  url: string;
  name: string;
  totalBytes: number;
  receivedBytes: number;
  download: WatchedDownload | undefined;
}

class WatchedDownload implements PageDownload {
  readonly startedAtMs = Date.now();
  #maxBytes = Number.POSITIVE_INFINITY;
  #tooLarge = false;
  progress: Progress | undefined;

  constructor(private readonly download: Download) {}

  get url(): string {
    return this.download.url();
  }

  get suggestedName(): string {
    return this.download.suggestedFilename();
  }

  limit(maxBytes: number): void {
    this.#maxBytes = maxBytes;
    this.check();
  }

  /** Cancels when the announced or arrived bytes pass the limit. */
  check(): void {
    const progress = this.progress;
    if (this.#tooLarge || !progress) return;
    if (progress.totalBytes > this.#maxBytes || progress.receivedBytes > this.#maxBytes) {
      this.#tooLarge = true;
      void this.download.cancel().catch(() => undefined);
    }
  }

  async finished(): Promise<DownloadEnd> {
    const failure = await this.download.failure().catch((error: unknown) => String(error));
    const receivedBytes = this.progress?.receivedBytes ?? 0;
    if (this.#tooLarge) return { ok: false, reason: 'too_large', receivedBytes };
    if (failure !== null) return { ok: false, reason: 'failed', receivedBytes };
    const path = await this.download.path().catch(() => null);
    return path === null ? { ok: false, reason: 'failed', receivedBytes } : { ok: true, path };
  }

  delete(): Promise<void> {
    return this.download.delete().catch(() => undefined);
  }
}

/**
 * The downloads of every page of one browser context (a lease's): each is told to `listener`
 * as it starts. Playwright's own download events carry no progress, so each page also has a
 * DevTools session of its own for Chromium's `Page.downloadProgress`, matched to Playwright's
 * download by its URL and suggested name; a page whose session cannot be had is watched without
 * progress (its downloads are checked once they end).
 */
export class ContextDownloads {
  #listener: ((download: PageDownload) => void) | undefined;
  readonly #progress = new Map<string, Progress>();
  readonly #sessions = new Set<CDPSession>();

  constructor(private readonly context: BrowserContext) {
    context.on('page', (page) => this.#watch(page));
  }

  /** Who is told each download from now on (one listener: the lease's). */
  onDownload(listener: (download: PageDownload) => void): void {
    this.#listener = listener;
  }

  #watch(page: Page): void {
    page.on('download', (download) => this.#started(download));
    void this.context
      .newCDPSession(page)
      .then(async (session) => {
        this.#sessions.add(session);
        session.on('Page.downloadWillBegin', (event) => {
          this.#progress.set(event.guid, {
            guid: event.guid,
            url: event.url,
            name: event.suggestedFilename,
            totalBytes: 0,
            receivedBytes: 0,
            download: undefined,
          });
          this.#match();
        });
        session.on('Page.downloadProgress', (event) => {
          const progress = this.#progress.get(event.guid);
          if (!progress) return;
          progress.totalBytes = event.totalBytes;
          progress.receivedBytes = event.receivedBytes;
          if (event.state !== 'inProgress') this.#progress.delete(event.guid);
          progress.download?.check();
        });
        await session.send('Page.enable');
      })
      .catch(() => undefined);
  }

  readonly #unmatched: WatchedDownload[] = [];

  #started(download: Download): void {
    const watched = new WatchedDownload(download);
    this.#unmatched.push(watched);
    this.#match();
    if (this.#listener) this.#listener(watched);
    // Nobody to keep it: the browser's file is let go.
    else void download.cancel().catch(() => undefined);
  }

  /** Pairs Playwright's downloads with Chromium's progress by URL and suggested name, oldest first. */
  #match(): void {
    for (const watched of [...this.#unmatched]) {
      for (const progress of this.#progress.values()) {
        if (progress.download || progress.url !== watched.url || progress.name !== watched.suggestedName)
          continue;
        progress.download = watched;
        watched.progress = progress;
        this.#unmatched.splice(this.#unmatched.indexOf(watched), 1);
        watched.check();
        break;
      }
    }
  }
}
