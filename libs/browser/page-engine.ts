import type { Frame, Page, Response } from 'playwright-core';
import { ZodError } from 'zod';
import {
  type ActArgs,
  type ActArgsInput,
  actArgsSchema,
  DIALOG_REF,
  type NavigateArgs,
  navigateArgsSchema,
  type ObserveArgsInput,
  type OpenedSecret,
  observeArgsSchema,
  type PersonInputEvent,
  type SettleResult,
} from '../contracts/index.js';
import { dispatch, targetFor, type UploadPayload } from './act-target.js';
import { CREDENTIAL_FIELDS_SELECTOR, DeclaredSecrets } from './declared-secrets.js';
import { type ObservedDialog, observeWithDialog, untilDialog } from './dialogs.js';
import { BrowserToolError, NavigationFailedError } from './errors.js';
import { netErrorOf, neverReachedServer } from './net-errors.js';
import {
  captureObservation,
  observeUntil,
  parseContinuation,
  type RevisionState,
  type ToolOutcome,
} from './observation.js';
import { Operation, type OperationLimits, within } from './operation.js';
import { originAllowed, originOf } from './origin-guard.js';
import type { Box, Capture } from './page-capture.js';
import { type BlockedCounts, ContextFence, type FenceOptions } from './page-fence.js';
import { PageLogRecorder } from './page-log.js';
import { dispatchPersonInput } from './person-input.js';
import { settlePage } from './settle.js';
import { PageBundle, TabStack } from './tabs.js';

/** How long a navigation that never reached a server waits for Chromium's error page to commit. */
const ERROR_PAGE_COMMIT_WAIT_MS = 2_000;

export interface PageEngineOptions {
  /** The profile's allowed origins (`https://example.com`); top-level navigations elsewhere are blocked. */
  allowedOrigins: readonly string[];
  /** Origins child frames may load besides the allowed ones; none by default. */
  frameOrigins?: readonly string[] | undefined;
  /** `allowed_origins` restricts subresources to allowed ∪ frame origins; `any` (the default) does not. */
  subresources?: 'any' | 'allowed_origins' | undefined;
  /** The context's egress door, which judges its subresources (see FenceOptions). */
  egressDoor?: FenceOptions['egressDoor'];
  /**
   * Told every settle's result (ADR-0159: reported on the observation and in metrics), so the
   * caller can record it; the engine itself holds no metrics registry. Must not throw.
   */
  onSettle?: (tool: 'navigate' | 'act', settle: SettleResult) => void;
}

/**
 * The three browser tools of contract 1.4.0 over the pages of one lease (DESIGN §6): navigate,
 * observe and act, each giving back the observation and, beside it, the platform's evidence key.
 * Calls run one at a time, on the current tab (a page the leased page opens on an allowed
 * origin becomes current; see {@link TabStack}). Create it right after the page: requests are
 * tracked from then on.
 */
export class PageEngine {
  private queue: Promise<unknown> = Promise.resolve();
  /** Aborted when the engine closes: every wait of a call under way ends then. */
  private readonly closing = new AbortController();
  private ending: Promise<void> | undefined;

  private constructor(
    private readonly tabs: TabStack,
    private readonly fence: ContextFence,
    private readonly revisions: RevisionState,
    private readonly onSettle: PageEngineOptions['onSettle'],
    /** Told when another tab becomes current (the live view follows it). */
    private readonly switches: Set<() => void>,
    /** Each navigate's and act's console errors and failed requests, beside its answer. */
    private readonly pageLog: PageLogRecorder,
    /** The run's declared secrets: typed by reference, struck from every answer (DESIGN §12). */
    private readonly secrets: DeclaredSecrets,
  ) {}

  /**
   * One engine per browser context (one lease): the fence covers every page and frame of the
   * page's context, popups included, and is removed by {@link close}, which closes the
   * context too.
   */
  static async create(page: Page, options: PageEngineOptions): Promise<PageEngine> {
    // The bundle's tracking starts before its first await so no request of the page is missed.
    const first = PageBundle.open(page);
    let fence: ContextFence | undefined;
    try {
      fence = await ContextFence.install(page, options);
      const revisions: RevisionState = { current: null };
      const switches = new Set<() => void>();
      const tabs = new TabStack(await first, fence, () => {
        // A tab opened or closed: no reference of the page before it holds.
        revisions.current = null;
        for (const listener of switches) listener();
      });
      const secrets = new DeclaredSecrets();
      const pageLog = new PageLogRecorder(page.context(), (text, clipped) =>
        secrets.strikeText(text, clipped),
      );
      return new PageEngine(tabs, fence, revisions, options.onSettle, switches, pageLog, secrets);
    } catch (error) {
      await (await first.catch(() => undefined))?.close();
      await fence?.close();
      throw error;
    }
  }

  /**
   * The declared secrets of the run this engine's lease serves (DESIGN §12): what a `fill` may name
   * as `{{secret:NAME}}`, and what every later answer has struck. Told before the lease's first call.
   */
  useSecrets(secrets: readonly OpenedSecret[]): void {
    this.secrets.use(secrets);
  }

  /** The page the engine observes and acts on now (the newest open tab). */
  get page(): Page {
    return this.tabs.current.page;
  }

  /** Tells `listener` whenever another tab becomes current; answers the call that stops telling. */
  onTabSwitch(listener: () => void): () => void {
    this.switches.add(listener);
    return () => this.switches.delete(listener);
  }

  /**
   * The current tab's open dialog as a person watching the page is shown it: as the observation
   * shows it (clipped, the run's declared secrets struck), with the URL of the page that opened it.
   */
  dialog(): (ObservedDialog & { url: string }) | null {
    const bundle = this.tabs.current;
    const dialog = bundle.dialogs.observed();
    if (!dialog) return null;
    // Clipped at their bound, so a cut end is struck too.
    const struck: ObservedDialog = { ...dialog, message: this.secrets.strikeText(dialog.message, true) };
    if (dialog.default_value !== undefined)
      struck.default_value = this.secrets.strikeText(dialog.default_value, true);
    return { ...struck, url: bundle.page.url() };
  }

  /**
   * Tells `listener` whenever the current tab's dialog opens or is answered, and when another tab
   * becomes current (its dialog, if any, is the one to show); answers the call that stops telling.
   */
  onDialogChange(listener: () => void): () => void {
    let watched = this.tabs.current;
    let unwatch = watched.dialogs.onChange(listener);
    const unswitch = this.onTabSwitch(() => {
      if (this.tabs.current === watched) return;
      unwatch();
      watched = this.tabs.current;
      unwatch = watched.dialogs.onChange(listener);
      listener();
    });
    return () => {
      unwatch();
      unswitch();
    };
  }

  /** What the origin fence blocked so far (navigations and popups the live view shows refused). */
  blocked(): BlockedCounts {
    return this.fence.blocked();
  }

  /**
   * A person's input on the current tab (see {@link dispatchPersonInput}), between the engine's
   * other calls. No reference of the agent's survives it: the page may have changed in any way.
   */
  personInput(events: readonly PersonInputEvent[], limits: OperationLimits): Promise<void> {
    return this.serially(limits, async (op) => {
      this.revisions.current = null;
      await dispatchPersonInput(this.tabs.current, events, op);
    });
  }

  /** `browser.navigate {url}`: the settled page at the new URL. */
  navigate(args: NavigateArgs, limits: OperationLimits): Promise<ToolOutcome> {
    return this.serially(limits, (op) =>
      this.logged(() => this.navigateNow(parse(navigateArgsSchema, args), op)),
    );
  }

  /** `browser.observe {continuation? | wait_for?}`: the page as it is, not waited for. */
  observe(args: ObserveArgsInput, limits: OperationLimits): Promise<ToolOutcome> {
    return this.serially(limits, (op) => this.observeNow(parse(observeArgsSchema, args), op));
  }

  /**
   * `browser.act {revision, element, action, text?, file?, postcondition?}`: the settled page after
   * one action. An `upload` sets a file input's files to `upload`, the run's file its `file` names.
   */
  act(args: ActArgsInput, limits: OperationLimits, upload?: UploadPayload): Promise<ToolOutcome> {
    return this.serially(limits, (op) =>
      this.logged(() => this.actNow(parse(actArgsSchema, args), op, upload)),
    );
  }

  /** An effect's outcome with what the pages reported while it ran. */
  private async logged(effect: () => Promise<ToolOutcome>): Promise<ToolOutcome> {
    const { outcome, log } = await this.pageLog.during(effect);
    return { ...outcome, pageLog: log };
  }

  /**
   * Where the element of `revision` is on the viewport, for the person
   * deciding an act on it to see it outlined ({@link screenshot}). Not an effect: nothing is
   * dispatched and the page is left as it was. An open dialog has no box to outline: none then.
   */
  previewTarget(
    args: { revision: string; element: string },
    limits: OperationLimits,
  ): Promise<Box | undefined> {
    return this.serially(limits, async (op) => {
      if (args.revision !== this.revisions.current) {
        throw new BrowserToolError('page_changed', 'the revision is not the current one; observe again');
      }
      const bundle = this.tabs.current;
      if (args.element === DIALOG_REF || bundle.dialogs.open !== null) return undefined;
      const target = await targetFor(bundle.page, bundle.agent, { ...args, action: 'click' }, op, 'outline');
      try {
        const box = await target.element.boundingBox();
        if (!box) throw new BrowserToolError('element_not_found', `element ${args.element} is not visible`);
        return box;
      } finally {
        await target.element.dispose().catch(() => undefined);
      }
    });
  }

  /**
   * The current tab's viewport as it is now, `outline` drawn over it when given (DESIGN §12: taken
   * after the navigate or act it shows has answered, before any later call on the page). A page
   * held by a dialog cannot be painted, and a closed engine has no page: no capture then.
   */
  screenshot(options: { timeoutMs: number; outline?: Box | undefined }): Promise<Capture> {
    if (this.closing.signal.aborted) return Promise.resolve({ ok: false, reason: 'page_closed' });
    return this.serially({ deadlineMs: Date.now() + options.timeoutMs }, async () => {
      const bundle = this.tabs.current;
      if (bundle.page.isClosed()) return { ok: false, reason: 'page_closed' } as const;
      if (bundle.dialogs.open !== null) return { ok: false, reason: 'dialog_open' } as const;
      const untilMs = Date.now() + options.timeoutMs;
      return options.outline
        ? bundle.capture.outlined(options.outline, untilMs)
        : bundle.capture.viewport(untilMs);
    }).catch(
      (error: unknown) =>
        ({ ok: false, reason: this.closing.signal.aborted ? 'page_closed' : 'error', cause: error }) as const,
    );
  }

  /**
   * Ends the lease's pages: the fence aborts every request it holds and closes the context (every
   * tab with it) before it removes a route (see ContextFence.close); then the tabs are let go. A
   * call under way fails `lease_expired`, as does any later one. Idempotent.
   */
  close(): Promise<void> {
    this.ending ??= (async () => {
      this.closing.abort();
      this.pageLog.close();
      await this.fence.close();
      await this.tabs.close();
    })();
    return this.ending;
  }

  /**
   * Stops tracking and guarding every tab but leaves the pages open, unfenced from then on (every
   * request the fence held is aborted first): only for a caller that keeps the pages, never for a
   * lease's. Idempotent.
   */
  release(): Promise<void> {
    this.ending ??= (async () => {
      this.closing.abort();
      this.pageLog.close();
      await this.tabs.close();
      await this.fence.release();
    })();
    return this.ending;
  }

  /**
   * Runs calls one at a time. A call under way when the engine closes ends at once (its waits see
   * the close as an abort) and fails `lease_expired`: its page is gone with its lease.
   */
  private serially<T>(limits: OperationLimits, work: (op: Operation) => Promise<T>): Promise<T> {
    const run = this.queue.then(async () => {
      if (this.closing.signal.aborted) throw closedError(undefined);
      const signal = limits.signal
        ? AbortSignal.any([limits.signal, this.closing.signal])
        : this.closing.signal;
      try {
        return await work(new Operation({ ...limits, signal }));
      } catch (error) {
        if (this.closing.signal.aborted) throw closedError(error);
        throw error;
      }
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async navigateNow(args: NavigateArgs, op: Operation): Promise<ToolOutcome> {
    if (originOf(args.url) === null) {
      throw new BrowserToolError('invalid_arguments', 'url must be an absolute http(s) URL');
    }
    if (!originAllowed(args.url, this.fence.policy.pages)) {
      throw new BrowserToolError('url_disallowed', "the URL's origin is not in the profile's allowed list");
    }
    op.throwIfEnded('the navigation');
    const bundle = this.tabs.current;
    await op.beforeDispatch('the navigation');
    this.revisions.current = null;
    const blockedBefore = this.fence.blocked();
    // Leaving the page answers its open dialog; a navigation would otherwise wait for it.
    if (bundle.dialogs.open !== null)
      await bundle.dialogs.answer('dismiss', undefined).catch(() => undefined);
    // Chromium's error page commits after a navigation that never reached a server.
    const errorPage = nextMainFrameCommit(bundle.page);
    try {
      const response = bundle.page.goto(args.url, { waitUntil: 'commit', timeout: op.remainingMs() });
      // A beforeunload dialog holds the navigation: the page is observed with it, to be answered.
      const committed = await within(response, op.deadlineMs, untilDialog(op, bundle.dialogs).signal);
      if (!committed.done && bundle.dialogs.open === null) {
        throw new BrowserToolError(
          'provider_unavailable',
          'the navigation did not commit before the call ended',
        );
      }
      // Behind the browser worker's egress proxy a plain-http site that could not be reached at
      // all answers with the proxy's own page, naming the error the browser would have met.
      const neverSent = committed.done ? proxyNeverSentError(committed.value) : null;
      if (neverSent !== null)
        throw await this.navigationFailed(neverSent, undefined, errorPage, op, blockedBefore);
    } catch (error) {
      if (error instanceof NavigationFailedError) throw error;
      if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(error);
      if (error instanceof BrowserToolError) throw error;
      const netError = netErrorOf(error);
      if (netError !== null && neverReachedServer(netError)) {
        throw await this.navigationFailed(netError, error, errorPage, op, blockedBefore);
      }
      throw new BrowserToolError('provider_unavailable', 'the navigation failed', false, { cause: error });
    } finally {
      errorPage.cancel();
    }
    if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(undefined);
    const settled = await this.settleEffect('navigate', op);
    return this.withBlocked(await this.read(settled.bundle, op, 0, settled.settle), blockedBefore);
  }

  /**
   * A navigation that never reached a server: the page shows Chromium's error page once it
   * commits, which is settled and observed so the failure carries the page as it now is.
   */
  private async navigationFailed(
    netError: string,
    cause: unknown,
    errorPage: { committed: Promise<void> },
    op: Operation,
    blockedBefore: BlockedCounts,
  ): Promise<NavigationFailedError> {
    await within(
      errorPage.committed,
      Math.min(op.deadlineMs, Date.now() + ERROR_PAGE_COMMIT_WAIT_MS),
      op.signal,
    );
    const settled = await this.settleEffect('navigate', op);
    const outcome = await this.read(settled.bundle, op, 0, settled.settle);
    return new NavigationFailedError(netError, this.withBlocked(outcome, blockedBefore), { cause });
  }

  private async observeNow(
    args: ReturnType<typeof observeArgsSchema.parse>,
    op: Operation,
  ): Promise<ToolOutcome> {
    // A tab an earlier call announced is waited for, so this observation does not switch pages untold.
    await this.tabs.announcedSettled(op, 0);
    let offset = 0;
    if (args.continuation !== undefined) {
      const position = parseContinuation(args.continuation);
      if (position === null)
        throw new BrowserToolError('invalid_arguments', 'continuation is not one this page gave');
      if (position.revision !== this.revisions.current) {
        throw new BrowserToolError(
          'page_changed',
          'continuation belongs to an earlier revision; observe again',
        );
      }
      offset = position.offset;
    }
    const bundle = this.tabs.current;
    const read = () => this.read(bundle, op, offset, null);
    return args.wait_for === undefined ? read() : observeUntil(read, args.wait_for, op);
  }

  private async actNow(
    args: ActArgs,
    op: Operation,
    upload: UploadPayload | undefined,
  ): Promise<ToolOutcome> {
    if ((args.action === 'fill' || args.action === 'press') && args.text === undefined) {
      throw new BrowserToolError('invalid_arguments', `${args.action} needs text`);
    }
    if ((args.action === 'upload') !== (args.file !== undefined)) {
      throw new BrowserToolError(
        'invalid_arguments',
        'upload needs file (a file id), and only upload takes one',
      );
    }
    // DESIGN §12: only a file of the run's own input is ever set, told by the caller with its bytes.
    if (args.file !== undefined && upload?.id !== args.file) {
      throw new BrowserToolError('invalid_arguments', `file ${args.file} is not among the run's files`);
    }
    if (args.action === 'select' && (args.text === undefined) === (args.labels === undefined)) {
      throw new BrowserToolError(
        'invalid_arguments',
        'select needs text (one option) or labels (a multiple select), not both',
      );
    }
    const answersDialog = args.action === 'accept' || args.action === 'dismiss';
    if (answersDialog !== (args.element === DIALOG_REF)) {
      throw new BrowserToolError(
        'invalid_arguments',
        `accept and dismiss answer the dialog (element "${DIALOG_REF}"), and only they do`,
      );
    }
    const named = this.secrets.referencedBy(args);
    op.throwIfEnded('the action');
    if (args.revision !== this.revisions.current) {
      throw new BrowserToolError('page_changed', 'the revision is not the current one; observe again');
    }
    const bundle = this.tabs.current;
    const blockedBefore = this.fence.blocked();
    if (answersDialog) {
      await bundle.dialogs.answerAsAct(args.action as 'accept' | 'dismiss', args.text, op);
    } else {
      await this.dispatchOn(bundle, args, op, named, upload);
    }
    // ADR-0130 d6: the settled page is returned; no earlier reference survives the action.
    this.revisions.current = null;
    const settled = await this.settleEffect('act', op);
    if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(undefined);
    const read = () => this.read(settled.bundle, op, 0, settled.settle);
    try {
      const postcondition = args.postcondition;
      const outcome =
        postcondition === undefined ? await read() : await observeUntil(read, postcondition, op);
      return this.withBlocked(outcome, blockedBefore);
    } catch (error) {
      // ADR-0159: evidence lost after an action leaves its outcome unknown.
      throw new BrowserToolError(
        'outcome_unknown',
        `the page after the ${args.action} could not be read`,
        false,
        {
          cause: error,
        },
      );
    }
  }

  private async dispatchOn(
    bundle: PageBundle,
    args: ActArgs,
    op: Operation,
    named: readonly OpenedSecret[],
    upload: UploadPayload | undefined,
  ): Promise<void> {
    if (bundle.dialogs.open !== null) {
      throw new BrowserToolError(
        'action_not_allowed',
        `${args.action} is not allowed: a dialog is open; accept or dismiss it first`,
      );
    }
    const target = await targetFor(bundle.page, bundle.agent, args, op);
    let sent = args;
    try {
      if (named.length > 0) {
        // DESIGN §12: the value goes in here, after the target is known to take it, never before.
        sent = { ...args, text: await this.secrets.textFor(args, named, target.element) };
        // The field shows what was typed: its screenshots mask credential fields from now on.
        bundle.capture.mask(CREDENTIAL_FIELDS_SELECTOR);
      }
      await op.beforeDispatch('the action');
    } catch (error) {
      await target.element.dispose().catch(() => undefined);
      throw error;
    }
    try {
      // A dialog the action opens blocks it until answered: the action reached the page then.
      await dispatch(target.element, sent, target.selectBy, untilDialog(op, bundle.dialogs), upload);
    } catch (error) {
      if (bundle.dialogs.open !== null && !op.signal?.aborted) return;
      // A tab the action closed (window.close() in its handler) took it: the previous tab is observed.
      if (bundle.page.isClosed() && this.tabs.current !== bundle) return;
      if (error instanceof BrowserToolError) throw error;
      // Playwright refuses an unknown key name before sending anything.
      if (args.action === 'press' && error instanceof Error && /Unknown key/i.test(error.message)) {
        throw new BrowserToolError('invalid_arguments', 'press needs a key name such as Enter or Control+A');
      }
      // The action may have reached the page: its effect is unknown, and it is never retried here.
      throw new BrowserToolError(
        'outcome_unknown',
        `the ${args.action} may or may not have taken effect`,
        false,
        {
          cause: error,
        },
      );
    } finally {
      // Released without waiting: the act's answer needs nothing more from this handle.
      void target.element.dispose().catch(() => undefined);
    }
  }

  /**
   * ADR-0159's settle after an effect, on the page the effect left current: a tab the effect
   * opened is waited for (inside the call's deadline), becomes current and is settled itself.
   */
  private async settleEffect(
    tool: 'navigate' | 'act',
    op: Operation,
  ): Promise<{ bundle: PageBundle; settle: SettleResult }> {
    let bundle = this.tabs.current;
    let settle = await this.settleOn(bundle, op);
    // A tab announced since the call began (before its settle ended) is this effect's: it is awaited.
    await this.tabs.announcedSettled(op, op.startedAtMs);
    if (bundle !== this.tabs.current) {
      bundle = this.tabs.current;
      settle = await this.settleOn(bundle, op);
    }
    this.onSettle?.(tool, settle);
    return { bundle, settle };
  }

  /** Settles `bundle`'s page; a dialog open or opening ends it at once (waiting would call into the page). */
  private async settleOn(bundle: PageBundle, op: Operation): Promise<SettleResult> {
    if (bundle.dialogs.open !== null) return { result: 'bound_expired', elapsed_ms: 0 };
    return settlePage(bundle.page, bundle.agent, bundle.tracker, untilDialog(op, bundle.dialogs));
  }

  /**
   * One observation of `bundle`'s page, with the tabs. While a dialog is open the page
   * is read without calling into it; a dialog that opens during a capture cuts the capture short.
   * A tab that opened or closed during the capture made another page current: that one is read.
   */
  private async read(
    bundle: PageBundle,
    op: Operation,
    offset: number,
    settle: SettleResult | null,
  ): Promise<ToolOutcome> {
    let outcome = await this.readPage(bundle, op, offset, settle);
    if (bundle !== this.tabs.current) {
      const current = this.tabs.current;
      outcome = await this.readPage(current, op, 0, settle);
      // Switched again meanwhile: this revision is not the current page's.
      if (current !== this.tabs.current) this.revisions.current = null;
    }
    // DESIGN §12: the declared secrets' values are struck from what the engine answers (the
    // evidence key, never shown, was taken from the page as it is).
    const observation = this.secrets.strikeObservation(outcome.observation);
    const tabs = this.tabs.observed();
    return { ...outcome, observation: tabs ? { ...observation, tabs } : observation };
  }

  private async readPage(
    bundle: PageBundle,
    op: Operation,
    offset: number,
    settle: SettleResult | null,
  ): Promise<ToolOutcome> {
    if (bundle.dialogs.open !== null) return this.readWithDialog(bundle, op, settle);
    try {
      const readOp = untilDialog(op, bundle.dialogs);
      return await captureObservation(bundle.agent, this.revisions, readOp, { offset, settle });
    } catch (error) {
      if (bundle.dialogs.open === null || op.signal?.aborted) throw error;
      return this.readWithDialog(bundle, op, settle);
    }
  }

  private readWithDialog(
    bundle: PageBundle,
    op: Operation,
    settle: SettleResult | null,
  ): Promise<ToolOutcome> {
    return observeWithDialog(bundle.page, bundle.dialogs, this.revisions, {
      settle,
      untilMs: op.deadlineMs,
    });
  }

  private navigationBlockedSince(before: BlockedCounts): boolean {
    return this.fence.blocked().navigation !== before.navigation;
  }

  /**
   * What the fence blocked during the call besides the page's own navigation —
   * popups closed before they loaded, frames, subresources — is told on the observation, so the
   * model knows the page it sees is missing them. The call itself succeeded: its effect happened.
   */
  private withBlocked(outcome: ToolOutcome, before: BlockedCounts): ToolOutcome {
    const now = this.fence.blocked();
    const blocked = {
      popups: now.popup - before.popup,
      frames: now.frame - before.frame,
      subresources: now.subresource - before.subresource,
    };
    if (blocked.popups + blocked.frames + blocked.subresources === 0) return outcome;
    return { ...outcome, observation: { ...outcome.observation, blocked } };
  }
}

/** The page's next main-frame commit, told once; `cancel` stops listening. */
function nextMainFrameCommit(page: Page): { committed: Promise<void>; cancel: () => void } {
  let listener: (frame: Frame) => void = () => undefined;
  const committed = new Promise<void>((resolve) => {
    listener = (frame) => {
      if (frame === page.mainFrame()) resolve();
    };
  });
  page.on('framenavigated', listener);
  return { committed, cancel: () => page.off('framenavigated', listener) };
}

/**
 * The error a response of the egress proxy's own names (`leasehold-egress-error`, which the proxy
 * strips from every site's answer): a request that never reached a server. Null for any other.
 */
function proxyNeverSentError(response: Response | null): string | null {
  const name = response?.headers()['leasehold-egress-error'];
  if (name === undefined || !/^ERR_[A-Z0-9_]+$/.test(name)) return null;
  const netError = `net::${name}`;
  return neverReachedServer(netError) ? netError : null;
}

function closedError(cause: unknown): BrowserToolError {
  return new BrowserToolError('lease_expired', "the lease's pages were closed", false, { cause });
}

function disallowedRedirect(cause: unknown): BrowserToolError {
  return new BrowserToolError(
    'url_disallowed',
    "the navigation was redirected or sent to an origin outside the profile's allowed list and was blocked",
    false,
    { cause },
  );
}

function parse<T>(schema: { parse(value: unknown): T }, value: unknown): T {
  try {
    return schema.parse(value);
  } catch (error) {
    if (error instanceof ZodError) {
      throw new BrowserToolError('invalid_arguments', error.issues.map((issue) => issue.message).join('; '));
    }
    throw error;
  }
}
