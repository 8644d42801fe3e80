import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SCREENCAST_MAX_FPS, type ScreencastFrame, TabScreencast } from '../../libs/browser/index.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { PageServer } from '../fixtures/page-server.js';

/** The live view's screencast of one tab, on real Chromium. */
describe('a tab screencast', () => {
  let browser: Browser;
  let site: PageServer;

  beforeAll(async () => {
    browser = await launchTestBrowser();
    site = await PageServer.start();
    // Repaints every animation frame for as long as it runs: frames come faster than the cast's pace.
    site.addPage(
      'cast-busy.html',
      `<!doctype html><title>Busy</title><p id="n">0</p>
       <script>let n = 0; (function tick() { document.getElementById('n').textContent = String(++n);
       requestAnimationFrame(tick); })();</script>`,
    );
    site.addPage('cast-next.html', '<!doctype html><title>Next</title><h1>the next page</h1>');
  });

  afterAll(async () => {
    await browser?.close();
    await site?.close();
  });

  async function cast(page: Page) {
    const frames: ScreencastFrame[] = [];
    const screencast = new TabScreencast({ page, onTabSwitch: () => () => undefined }, (frame) =>
      frames.push(frame),
    );
    return { frames, screencast };
  }

  it('keeps sending frames after a burst faster than its pace: the page it moves to is shown', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(site.url('/pages/cast-busy.html'));
    const { frames, screencast } = await cast(page);
    try {
      // A second of a page repainting at 60 frames a second, as typing or an animation makes.
      await expect.poll(() => frames.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(5);
      await page.goto(site.url('/pages/cast-next.html'));
      // Chromium drops what it paints while two frames wait for their acknowledgement: a cast that
      // paced Chromium by its acknowledgements left the stream on the busy page for good.
      await expect
        .poll(() => frames.at(-1)?.url, { timeout: 10_000 })
        .toBe(site.url('/pages/cast-next.html'));
    } finally {
      await screencast.stop();
      await context.close();
    }
  });

  it('hands on frames no faster than its pace from a page that paints at sixty a second', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    await page.goto(site.url('/pages/cast-busy.html'));
    const sentAtMs: number[] = [];
    const screencast = new TabScreencast({ page, onTabSwitch: () => () => undefined }, () =>
      sentAtMs.push(performance.now()),
    );
    try {
      await expect.poll(() => sentAtMs.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(12);
      const gaps = sentAtMs.slice(1).map((atMs, i) => atMs - (sentAtMs[i] as number));
      // A timer may fire a millisecond early; never a whole frame's interval.
      expect(Math.min(...gaps)).toBeGreaterThanOrEqual(1_000 / SCREENCAST_MAX_FPS - 2);
    } finally {
      await screencast.stop();
      await context.close();
    }
  });
});
