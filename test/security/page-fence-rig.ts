import type { Browser, BrowserContext, Page } from 'playwright-core';
import {
  compileFencePolicy,
  type OperationLimits,
  PageEngine,
  type PageEngineOptions,
} from '../../libs/browser/index.js';
import type { BrowserObservation } from '../../libs/contracts/index.js';
import { EgressGuard, EgressProxy } from '../../libs/egress/index.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { PageServer } from '../fixtures/page-server.js';

/**
 * Real Chromium and two local servers: `site` is the profile's allowed origin, `elsewhere` one it
 * does not allow. Every request `elsewhere` sees is in its log, so a fence that holds
 * leaves it empty. A fresh context and engine per test, each context behind a door of its own of
 * an egress proxy that lets loopback through, as the browser worker makes them.
 */
export class FenceRig {
  browser!: Browser;
  site!: PageServer;
  elsewhere!: PageServer;
  egress!: EgressProxy;
  private readonly contexts: BrowserContext[] = [];
  private readonly engines: PageEngine[] = [];

  async start(): Promise<void> {
    [this.browser, this.site, this.elsewhere] = await Promise.all([
      launchTestBrowser(),
      PageServer.start(),
      PageServer.start(),
    ]);
    const guard = new EgressGuard({ allowCidrs: ['127.0.0.0/8', '::1/128'], ownPorts: [] });
    this.egress = await EgressProxy.start({ guard, log: { debug: () => undefined } });
  }

  async stop(): Promise<void> {
    await this.cleanup();
    await this.browser?.close();
    await Promise.all([this.site?.close(), this.elsewhere?.close(), this.egress?.close()]);
  }

  /** A page in a new context, fenced to the site's origin (unless `options` names others) plus what `options` adds. */
  async engine(
    options: Partial<PageEngineOptions> = {},
  ): Promise<{ engine: PageEngine; page: Page; context: BrowserContext }> {
    const fence = { allowedOrigins: [this.site.origin], ...options };
    const door = await this.egress.open(compileFencePolicy(fence).subresources);
    const context = await this.browser.newContext({ proxy: { server: door.url } });
    context.once('close', () => void door.close());
    this.contexts.push(context);
    const page = await context.newPage();
    const engine = await PageEngine.create(page, { ...fence, egressDoor: door });
    this.engines.push(engine);
    return { engine, page, context };
  }

  async cleanup(): Promise<void> {
    for (const engine of this.engines.splice(0)) await engine.close();
    for (const context of this.contexts.splice(0)) await context.close().catch(() => undefined);
    this.site.log.length = 0;
    this.elsewhere.log.length = 0;
  }

  /** Requests that reached the disallowed server. */
  get elsewhereHits(): number {
    return this.elsewhere.log.length;
  }
}

export function limits(ms = 15_000): OperationLimits {
  return { deadlineMs: Date.now() + ms };
}

export function refOf(observation: BrowserObservation, name: string): string {
  const element = observation.elements.find((candidate) => candidate.name === name);
  if (!element) throw new Error(`no element named ${name}`);
  return element.ref;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
