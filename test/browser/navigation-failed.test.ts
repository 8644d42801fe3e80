import type { Browser, BrowserContext } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { launchChromium, PageEngine } from '../../libs/browser/index.js';
import { testChromiumPath } from '../fixtures/chromium.js';
import { closedLoopbackPort } from '../fixtures/closed-port.js';
import { PageServer } from '../fixtures/page-server.js';
import { limits } from './harness.js';

const UNRESOLVABLE = 'http://nonexistent.invalid';
let browser: Browser;
let server: PageServer;
let closedPort: number;
const contexts: BrowserContext[] = [];
const engines: PageEngine[] = [];
beforeAll(async () => {
  // The name fails inside Chromium: no resolver query leaves the machine.
  [browser, server, closedPort] = await Promise.all([
    launchChromium({
      executablePath: testChromiumPath(),
      headless: true,
      args: ['--host-resolver-rules=MAP nonexistent.invalid ~NOTFOUND'],
    }),
    PageServer.start(),
    closedLoopbackPort(),
  ]);
});
afterEach(async () => {
  for (const engine of engines.splice(0)) await engine.close();
  for (const context of contexts.splice(0)) await context.close().catch(() => undefined);
});
afterAll(async () => {
  await browser?.close();
  await server?.close();
});

async function engineFor(origins: string[]): Promise<PageEngine> {
  const context = await browser.newContext();
  contexts.push(context);
  const engine = await PageEngine.create(await context.newPage(), { allowedOrigins: origins });
  engines.push(engine);
  return engine;
}

describe('a navigation that never reached a server', () => {
  it.each([
    ['an unresolvable name', () => `${UNRESOLVABLE}/`, 'net::ERR_NAME_NOT_RESOLVED'],
    ['a closed loopback port', () => `http://127.0.0.1:${closedPort}/`, 'net::ERR_CONNECTION_REFUSED'],
  ])(
    'answers navigation_failed with Chromium’s error name for %s, with a fresh observation, and the page stays usable',
    async (_what, url, netError) => {
      const engine = await engineFor([server.origin, UNRESOLVABLE, `http://127.0.0.1:${closedPort}`]);
      const before = await engine.navigate({ url: server.url('/pages/second.html') }, limits());
      const failure = await engine.navigate({ url: url() }, limits()).then(
        () => null,
        (error: unknown) => error,
      );
      expect(failure).toMatchObject({ code: 'navigation_failed', netError });
      const outcome = (failure as { outcome?: { observation: { revision: string; url: string } } }).outcome;
      expect(outcome?.observation.revision).toBeTruthy();
      expect(outcome?.observation.revision).not.toBe(before.observation.revision);
      // The earlier page's references are void; the engine goes on.
      await expect(
        engine.act({ revision: before.observation.revision, element: 'e1', action: 'click' }, limits()),
      ).rejects.toMatchObject({ code: 'page_changed' });
      const again = await engine.navigate({ url: server.url('/pages/second.html') }, limits());
      expect(again.observation.title).toBe('Second page');
    },
  );
});
