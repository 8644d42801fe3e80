import type { Browser } from 'playwright-core';
import type { Logger } from '../../libs/telemetry/index.js';

/** Waits between starts of a Chromium that keeps exiting: doubled from the first, never past the last. */
export const RELAUNCH_FIRST_WAIT_MS = 500;
export const RELAUNCH_MAX_WAIT_MS = 30_000;

export interface ChromiumProcessHooks {
  /** Chromium exited on its own: every page it held is gone (revoke their leases, drop warm contexts). */
  lost(): Promise<void>;
  /** A new Chromium answers (the page factory reads `browser` from now on). */
  started?(browser: Browser): void;
}

/**
 * The worker's one Chromium, started again when it exits on its own. A renderer's crash can take
 * the browser process with it (seen with a crashed page whose popup's navigation was held): the
 * worker must not stay up with no browser, answering every acquire "could not be created" until
 * someone restarts it. Its leases are revoked (their pages died with it) and a new Chromium is
 * started, with waits that double while starts fail; `/readyz` says `chromium` is down meanwhile.
 */
export class ChromiumProcess {
  #browser: Browser;
  #closing = false;
  #restarting: Promise<void> | undefined;

  private constructor(
    browser: Browser,
    private readonly launch: () => Promise<Browser>,
    private readonly hooks: ChromiumProcessHooks,
    private readonly log: Logger,
  ) {
    this.#browser = browser;
    this.#watch(browser);
  }

  static async start(
    launch: () => Promise<Browser>,
    hooks: ChromiumProcessHooks,
    log: Logger,
  ): Promise<ChromiumProcess> {
    return new ChromiumProcess(await launch(), launch, hooks, log);
  }

  /** The Chromium of now (another one after a restart). */
  get browser(): Browser {
    return this.#browser;
  }

  get connected(): boolean {
    return this.#browser.isConnected();
  }

  /** Resolves once no restart is under way (tests wait for the new Chromium with it). */
  async settled(): Promise<void> {
    while (this.#restarting) await this.#restarting;
  }

  async close(): Promise<void> {
    this.#closing = true;
    await this.#restarting;
    await this.#browser.close();
  }

  #watch(browser: Browser): void {
    browser.once('disconnected', () => {
      if (this.#closing || browser !== this.#browser) return;
      this.#restarting = this.#restart().finally(() => {
        this.#restarting = undefined;
      });
    });
  }

  async #restart(): Promise<void> {
    this.log.error('chromium exited: its leases are revoked and it is started again');
    await this.hooks
      .lost()
      .catch((error: unknown) =>
        this.log.warn({ err: error }, 'revoking the leases of an exited chromium failed'),
      );
    let waitMs = RELAUNCH_FIRST_WAIT_MS;
    while (!this.#closing) {
      try {
        const browser = await this.launch();
        if (this.#closing) {
          await browser.close();
          return;
        }
        this.#browser = browser;
        this.#watch(browser);
        this.hooks.started?.(browser);
        this.log.info({ version: browser.version() }, 'chromium started again');
        return;
      } catch (error) {
        this.log.error({ err: error, retry_in_ms: waitMs }, 'chromium could not be started again');
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        waitMs = Math.min(waitMs * 2, RELAUNCH_MAX_WAIT_MS);
      }
    }
  }
}
