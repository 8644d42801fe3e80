import type { Browser, BrowserContext, BrowserContextOptions } from 'playwright-core';
import {
  type Box,
  type Capture,
  flushPageCookies,
  type OperationLimits,
  PageEngine,
  type PageEngineOptions,
} from '../browser/index.js';
import type { OpenedSecret } from '../contracts/index.js';
import type { PageFactory, PageResult, PageSession } from './pages.js';

/**
 * One Playwright browser context per lease, created from the profile's sealed storage state, with
 * the page engine over its one page.
 */
export class PlaywrightPageFactory implements PageFactory {
  readonly #contexts = new Set<BrowserContext>();

  readonly #browser: () => Browser;

  constructor(
    /** The browser, or where to read the current one (the worker starts another if it exits). */
    browser: Browser | (() => Browser),
    /** Issue 14: told every settle of every lease's page (the browser worker counts them). */
    private readonly options: { onSettle?: PageEngineOptions['onSettle'] } = {},
  ) {
    this.#browser = typeof browser === 'function' ? browser : () => browser;
  }

  openContexts(): number {
    return this.#contexts.size;
  }

  async open(input: Parameters<PageFactory['open']>[0]): Promise<PageSession> {
    const context = await this.#browser().newContext({
      // Issue 11: a service worker's requests belong to no page, and it outlives the lease's pages.
      serviceWorkers: 'block',
      ...(input.storageState
        ? { storageState: input.storageState as BrowserContextOptions['storageState'] }
        : {}),
    });
    this.#contexts.add(context);
    context.once('close', () => this.#contexts.delete(context));
    try {
      const page = await context.newPage();
      const engine = await PageEngine.create(page, {
        allowedOrigins: input.allowedOrigins,
        frameOrigins: input.frameOrigins,
        subresources: input.subresources,
        ...(this.options.onSettle ? { onSettle: this.options.onSettle } : {}),
      });
      return new PlaywrightPageSession(context, engine);
    } catch (error) {
      await context.close().catch(() => undefined);
      throw error;
    }
  }
}

function effectResult(outcome: { observation: unknown; evidenceKey: string }): PageResult {
  return { observation: outcome.observation, evidenceKey: outcome.evidenceKey };
}

class PlaywrightPageSession implements PageSession {
  constructor(
    private readonly context: BrowserContext,
    private readonly engine: PageEngine,
  ) {}

  async navigate(
    url: string,
    limits: OperationLimits,
    beforeDispatch: () => Promise<void>,
  ): Promise<PageResult> {
    return effectResult(await this.engine.navigate({ url }, { ...limits, beforeDispatch }));
  }

  async observe(args: Record<string, unknown>, limits: OperationLimits): Promise<PageResult> {
    const outcome = await this.engine.observe(args, limits);
    return { observation: outcome.observation, evidenceKey: outcome.evidenceKey };
  }

  async act(
    args: Record<string, unknown>,
    limits: OperationLimits,
    beforeDispatch: () => Promise<void>,
  ): Promise<PageResult> {
    return effectResult(
      await this.engine.act(args as Parameters<PageEngine['act']>[0], { ...limits, beforeDispatch }),
    );
  }

  previewTarget(
    args: { revision: string; element: string },
    limits: OperationLimits,
  ): Promise<Box | undefined> {
    return this.engine.previewTarget(args, limits);
  }

  screenshot(options: { timeoutMs: number; outline?: Box | undefined }): Promise<Capture> {
    return this.engine.screenshot(options);
  }

  useSecrets(secrets: readonly OpenedSecret[]): void {
    this.engine.useSecrets(secrets);
  }

  /** Issue 17.4: what the pages wrote is what is sealed — their cookie writes are waited for first. */
  async storageState(): Promise<unknown> {
    await flushPageCookies(this.context);
    return this.context.storageState();
  }

  /**
   * The engine closes the context, every page with it, before its fence removes a route: a
   * request the fence still held would otherwise go out unfenced after the lease ended.
   */
  async dispose(): Promise<void> {
    await this.engine.close();
  }
}
