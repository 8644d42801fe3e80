import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PlaywrightPageFactory } from '../../libs/lease/playwright-pages.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { PageServer } from '../fixtures/page-server.js';

let browser: Browser;
let site: PageServer;
beforeAll(async () => {
  [browser, site] = await Promise.all([launchTestBrowser(), PageServer.start()]);
});
afterAll(async () => {
  await browser?.close();
  await site?.close();
});

interface SealedState {
  cookies: { name: string; value: string }[];
}

describe('a seal holds what the page wrote just before it', () => {
  it('finds a cookie written from script and sealed at once, 50 times in a row', async () => {
    const factory = new PlaywrightPageFactory(browser);
    const session = await factory.open({
      profileId: 'seal',
      allowedOrigins: [site.origin],
      storageState: null,
    });
    try {
      await session.navigate(
        site.url('/pages/second.html'),
        { deadlineMs: Date.now() + 15_000 },
        async () => {},
      );
      const [context] = browser.contexts().filter((candidate) => candidate.pages().length > 0);
      const page = context?.pages()[0];
      if (!page) throw new Error('the lease has no page');
      const missed: number[] = [];
      for (let round = 0; round < 50; round += 1) {
        // The page writes, and the seal is asked for in the same breath: no wait in between.
        // Several writes, the one looked for last, as a page that stores its session would.
        await page.evaluate(`for (let i = 0; i < 20; i += 1) document.cookie = 'c' + i + '=' + 'x'.repeat(2000) + '; path=/; max-age=3600';
          document.cookie = 'round=${round}; path=/; max-age=3600';`);
        const state = (await session.storageState()) as SealedState;
        const cookie = state.cookies.find((candidate) => candidate.name === 'round');
        if (cookie?.value !== String(round)) missed.push(round);
      }
      expect(missed).toEqual([]);
    } finally {
      await session.dispose();
    }
  });
});
