import type { BrowserContext, Frame } from 'playwright-core';
import { sleepMs, within } from './operation.js';

/** How long a seal waits at most for what the pages wrote to reach the cookie store. */
export const COOKIE_FLUSH_BOUND_MS = 1_000;
const COOKIE_FLUSH_POLL_MS = 10;

/**
 * Waits until every cookie each page of `context` sees from script (`document.cookie`) is in the
 * context's cookie store too, at most {@link COOKIE_FLUSH_BOUND_MS}. Chromium applies a
 * `document.cookie` write asynchronously (renderer → network service), so a storage state read
 * right after a write can miss it; the page's own view is the truth the seal waits
 * for. Never throws: past the bound the seal takes the store as it is. A page that lies about its
 * cookies can only make the seal wait out the bound.
 */
export async function flushPageCookies(
  context: BrowserContext,
  boundMs: number = COOKIE_FLUSH_BOUND_MS,
): Promise<boolean> {
  const untilMs = Date.now() + boundMs;
  try {
    const frames = context.pages().flatMap((page) => (page.isClosed() ? [] : page.frames()));
    const views = (await Promise.all(frames.map((frame) => pageCookies(frame, untilMs)))).filter(
      (view): view is PageCookies => view !== null && view.pairs.length > 0,
    );
    if (views.length === 0) return true;
    for (;;) {
      const stored = await within(context.cookies(views.map((view) => view.url)), untilMs);
      if (!stored.done) return false;
      const present = new Set(stored.value.map((cookie) => `${cookie.name}=${cookie.value}`));
      if (views.every((view) => view.pairs.every((pair) => present.has(pair)))) return true;
      if (Date.now() + COOKIE_FLUSH_POLL_MS >= untilMs) return false;
      await sleepMs(COOKIE_FLUSH_POLL_MS);
    }
  } catch {
    return false;
  }
}

interface PageCookies {
  url: string;
  pairs: string[];
}

async function pageCookies(frame: Frame, untilMs: number): Promise<PageCookies | null> {
  const read = await within(
    frame.evaluate(`[location.href, typeof document.cookie === 'string' ? document.cookie : '']`) as Promise<
      [string, string]
    >,
    untilMs,
  ).catch(() => ({ done: false as const }));
  if (!read.done) return null;
  const [url, cookie] = read.value;
  if (!/^https?:/i.test(url)) return null;
  const pairs = cookie
    .split(';')
    .map((pair) => pair.trim())
    .filter((pair) => pair.includes('='));
  return { url, pairs };
}
