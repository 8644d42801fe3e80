import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { OperationLimits } from '../../libs/browser/index.js';
import { PageEngine, type PageEngineOptions } from '../../libs/browser/index.js';
import type { BrowserObservation } from '../../libs/contracts/index.js';
import { launchTestBrowser } from '../fixtures/chromium.js';
import { PageServer } from '../fixtures/page-server.js';

/** One browser and one fixture server per test file; a fresh context and engine per test. */
export class EngineHarness {
  browser!: Browser;
  server!: PageServer;
  private readonly contexts: BrowserContext[] = [];
  private readonly engines: PageEngine[] = [];

  constructor(private readonly serverOptions: { extraPorts?: number } = {}) {}

  async start(): Promise<void> {
    [this.browser, this.server] = await Promise.all([
      launchTestBrowser(),
      PageServer.start(this.serverOptions),
    ]);
  }

  async stop(): Promise<void> {
    await this.cleanup();
    await this.browser?.close();
    await this.server?.close();
  }

  /** A new page in its own context with an engine allowing only the server's 127.0.0.1 origin. */
  async engine(
    options: Omit<PageEngineOptions, 'allowedOrigins'> = {},
  ): Promise<{ engine: PageEngine; page: Page }> {
    const context = await this.browser.newContext();
    this.contexts.push(context);
    const page = await context.newPage();
    const engine = await PageEngine.create(page, { ...options, allowedOrigins: [this.server.origin] });
    this.engines.push(engine);
    return { engine, page };
  }

  async cleanup(): Promise<void> {
    for (const engine of this.engines.splice(0)) await engine.close();
    for (const context of this.contexts.splice(0)) await context.close().catch(() => undefined);
  }

  url(path: string): string {
    return this.server.url(path);
  }
}

/** Limits for one call: a deadline `ms` from now and, optionally, a signal. */
export function limits(ms = 15_000, signal?: AbortSignal): OperationLimits {
  return signal ? { deadlineMs: Date.now() + ms, signal } : { deadlineMs: Date.now() + ms };
}

/** The ref of the element named `name` in an observation; throws when there is none. */
export function ref(observation: BrowserObservation, name: string): string {
  const element = observation.elements.find((candidate) => candidate.name === name);
  if (!element) throw new Error(`no element named ${name}`);
  return element.ref;
}

/** Clicks the element named `name` of `observation` and answers the settled page's observation. */
export async function click(
  engine: PageEngine,
  observation: BrowserObservation,
  name: string,
): Promise<BrowserObservation> {
  return (
    await engine.act(
      { revision: observation.revision, element: ref(observation, name), action: 'click' },
      limits(),
    )
  ).observation;
}
