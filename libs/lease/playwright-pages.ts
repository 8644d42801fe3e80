import type { Browser, BrowserContext, BrowserContextOptions } from 'playwright-core';
import {
  type Box,
  type Capture,
  ContextDownloads,
  type CurrentTab,
  compileFencePolicy,
  flushPageCookies,
  type OperationLimits,
  type PageDownload,
  PageEngine,
  type PageEngineOptions,
  type ToolOutcome,
  type UploadPayload,
} from '../browser/index.js';
import type { OpenedSecret, PersonInputEvent } from '../contracts/index.js';
import type { EgressProxy } from '../egress/index.js';
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
    private readonly options: {
      /** Told every settle of every lease's page (the browser worker counts them). */
      onSettle?: PageEngineOptions['onSettle'];
      /**
       * The browser worker's egress proxy: each context gets a door of its own, which judges the
       * context's subresources by origin, so none waits on Node's routing.
       */
      egress?: EgressProxy;
    } = {},
  ) {
    this.#browser = typeof browser === 'function' ? browser : () => browser;
  }

  openContexts(): number {
    return this.#contexts.size;
  }

  async open(input: Parameters<PageFactory['open']>[0]): Promise<PageSession> {
    const fence = {
      allowedOrigins: input.allowedOrigins,
      frameOrigins: input.frameOrigins,
      subresources: input.subresources,
    };
    const door = await this.options.egress?.open(compileFencePolicy(fence).subresources);
    let context: BrowserContext;
    try {
      context = await this.#browser().newContext({
        // A service worker's requests belong to no page, and it outlives the lease's pages.
        serviceWorkers: 'block',
        // No credentials: Playwright would pause every request to answer the proxy's challenge.
        ...(door ? { proxy: { server: door.url } } : {}),
        ...(input.storageState
          ? { storageState: input.storageState as BrowserContextOptions['storageState'] }
          : {}),
      });
    } catch (error) {
      await door?.close();
      throw error;
    }
    this.#contexts.add(context);
    // The door closes after its context, so no page of it is left without its way out judged.
    context.once('close', () => {
      this.#contexts.delete(context);
      void door?.close();
    });
    // Before the first page, so no page's downloads go unwatched.
    const downloads = new ContextDownloads(context);
    try {
      const page = await context.newPage();
      const engine = await PageEngine.create(page, {
        ...fence,
        ...(door ? { egressDoor: door } : {}),
        ...(this.options.onSettle ? { onSettle: this.options.onSettle } : {}),
      });
      return new PlaywrightPageSession(context, engine, downloads);
    } catch (error) {
      await context.close().catch(() => undefined);
      throw error;
    }
  }
}

/** An effect's answer: the observation, its evidence key, and what the pages reported meanwhile. */
function effectResult(outcome: ToolOutcome): PageResult {
  return {
    observation: outcome.observation,
    evidenceKey: outcome.evidenceKey,
    ...(outcome.pageLog ? { artifacts: { page_log: outcome.pageLog } } : {}),
  };
}

class PlaywrightPageSession implements PageSession {
  constructor(
    private readonly context: BrowserContext,
    private readonly engine: PageEngine,
    private readonly downloads: ContextDownloads,
  ) {}

  onDownload(listener: (download: PageDownload) => void): void {
    this.downloads.onDownload(listener);
  }

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
    upload?: UploadPayload,
  ): Promise<PageResult> {
    return effectResult(
      await this.engine.act(args as Parameters<PageEngine['act']>[0], { ...limits, beforeDispatch }, upload),
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

  currentTab(): CurrentTab {
    const engine = this.engine;
    return {
      get page() {
        return engine.page;
      },
      onTabSwitch: (listener) => engine.onTabSwitch(listener),
      dialog: () => engine.dialog(),
      onDialogChange: (listener) => engine.onDialogChange(listener),
    };
  }

  personInput(events: readonly PersonInputEvent[], limits: OperationLimits): Promise<void> {
    return this.engine.personInput(events, limits);
  }

  blocked(): { navigation: number; popup: number } {
    return this.engine.blocked();
  }

  /** What the pages wrote is what is sealed — their cookie writes are waited for first. */
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
