import type { Page } from 'playwright-core';
import { ZodError } from 'zod';
import {
  type ActArgs,
  type ActArgsInput,
  actArgsSchema,
  type NavigateArgs,
  navigateArgsSchema,
  type ObserveArgsInput,
  observeArgsSchema,
  type SettleResult,
} from '../contracts/index.js';
import { dispatch, targetFor } from './act-target.js';
import { PageAgentWorld } from './agent-call.js';
import { BrowserToolError } from './errors.js';
import {
  captureObservation,
  observeUntil,
  parseContinuation,
  type RevisionState,
  type ToolOutcome,
} from './observation.js';
import { Operation, type OperationLimits, within } from './operation.js';
import { originAllowed, originOf } from './origin-guard.js';
import { type Capture, PageCapture, SettledCapture } from './page-capture.js';
import { type BlockedCounts, ContextFence } from './page-fence.js';
import { RequestTracker } from './request-tracker.js';
import { settlePage } from './settle.js';

export interface PageEngineOptions {
  /** The profile's allowed origins (`https://example.com`); top-level navigations elsewhere are blocked. */
  allowedOrigins: readonly string[];
  /** Origins child frames may load besides the allowed ones (issue 11); none by default. */
  frameOrigins?: readonly string[] | undefined;
  /** `allowed_origins` restricts subresources to allowed ∪ frame origins; `any` (the default) does not. */
  subresources?: 'any' | 'allowed_origins' | undefined;
  /**
   * Told every settle's result (ADR-0159: reported on the observation and in metrics), so the
   * caller can record it; the engine itself holds no metrics registry. Must not throw.
   */
  onSettle?: (tool: 'navigate' | 'act', settle: SettleResult) => void;
}

/** Issue 13: what an effect captures beside its observation when asked. */
export interface EffectOptions {
  /** A JPEG of the settled viewport, taken with the observation the answer carries. */
  screenshot?: boolean;
}

/** An effect's outcome, with its capture when one was asked for. */
export type EffectOutcome = ToolOutcome & { capture?: Capture };

/**
 * The three browser tools of contract 1.2.0 over one Playwright page (DESIGN §6): navigate, observe
 * and act, each giving back the observation and, beside it, the platform's evidence key. Calls on
 * one page run one at a time. Create it right after the page: requests are tracked from then on.
 */
export class PageEngine {
  private readonly revisions: RevisionState = { current: null };
  private readonly capture: PageCapture;
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;

  private constructor(
    readonly page: Page,
    private readonly tracker: RequestTracker,
    private readonly fence: ContextFence,
    private readonly agent: PageAgentWorld,
    private readonly onSettle: PageEngineOptions['onSettle'],
  ) {
    this.capture = new PageCapture(page);
  }

  /**
   * One engine per browser context (one lease): the fence covers every page and frame of the
   * page's context, popups included (issue 11), and is removed by {@link close}.
   */
  static async create(page: Page, options: PageEngineOptions): Promise<PageEngine> {
    // Tracking starts before the first await so no request of the page is missed.
    const tracker = new RequestTracker(page);
    let fence: ContextFence | undefined;
    let agent: PageAgentWorld | undefined;
    try {
      fence = await ContextFence.install(page, options);
      agent = await PageAgentWorld.open(page);
      return new PageEngine(page, tracker, fence, agent, options.onSettle);
    } catch (error) {
      tracker.close();
      await agent?.close();
      await fence?.close();
      throw error;
    }
  }

  /** `browser.navigate {url}`: the settled page at the new URL. */
  navigate(args: NavigateArgs, limits: OperationLimits, options: EffectOptions = {}): Promise<EffectOutcome> {
    return this.serially(() =>
      this.navigateNow(parse(navigateArgsSchema, args), new Operation(limits), options),
    );
  }

  /** `browser.observe {continuation? | wait_for?}`: the page as it is, not waited for. */
  observe(args: ObserveArgsInput, limits: OperationLimits): Promise<ToolOutcome> {
    return this.serially(() => this.observeNow(parse(observeArgsSchema, args), new Operation(limits)));
  }

  /** `browser.act {revision, element, action, text?, postcondition?}`: the settled page after one action. */
  act(args: ActArgsInput, limits: OperationLimits, options: EffectOptions = {}): Promise<EffectOutcome> {
    return this.serially(() => this.actNow(parse(actArgsSchema, args), new Operation(limits), options));
  }

  /**
   * Issue 13 (approval cards): the viewport with the element of `revision` outlined, for the person
   * deciding an act on it. Not an effect: nothing is dispatched and the page is left as it was.
   */
  preview(args: { revision: string; element: string }, limits: OperationLimits): Promise<Capture> {
    return this.serially(async () => {
      const op = new Operation(limits);
      if (args.revision !== this.revisions.current) {
        throw new BrowserToolError('page_changed', 'the revision is not the current one; observe again');
      }
      const target = await targetFor(this.page, this.agent, { ...args, action: 'click' }, op, 'outline');
      try {
        const box = await target.element.boundingBox();
        if (!box) throw new BrowserToolError('element_not_found', `element ${args.element} is not visible`);
        return await this.capture.outlined(box, op.deadlineMs, op.signal);
      } finally {
        await target.element.dispose().catch(() => undefined);
      }
    });
  }

  /** Stops tracking and guarding; the page itself belongs to the caller. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.tracker.close();
    await this.capture.close();
    await this.agent.close();
    await this.fence.close();
  }

  private serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.queue.then(() => {
      if (this.closed) throw new BrowserToolError('provider_unavailable', 'the page engine is closed');
      return work();
    });
    this.queue = run.catch(() => undefined);
    return run;
  }

  private async navigateNow(
    args: NavigateArgs,
    op: Operation,
    options: EffectOptions,
  ): Promise<EffectOutcome> {
    if (originOf(args.url) === null) {
      throw new BrowserToolError('invalid_arguments', 'url must be an absolute http(s) URL');
    }
    if (!originAllowed(args.url, this.fence.policy.pages)) {
      throw new BrowserToolError('url_disallowed', "the URL's origin is not in the profile's allowed list");
    }
    op.throwIfEnded('the navigation');
    await op.beforeDispatch('the navigation');
    this.revisions.current = null;
    const blockedBefore = this.fence.blocked();
    try {
      const response = this.page.goto(args.url, { waitUntil: 'commit', timeout: op.remainingMs() });
      const committed = await within(response, op.deadlineMs, op.signal);
      if (!committed.done) {
        throw new BrowserToolError(
          'provider_unavailable',
          'the navigation did not commit before the call ended',
        );
      }
    } catch (error) {
      if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(error);
      if (error instanceof BrowserToolError) throw error;
      throw new BrowserToolError('provider_unavailable', 'the navigation failed', false, { cause: error });
    }
    if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(undefined);
    const shot = this.settledCapture(options, op);
    const settle = await settlePage(this.page, this.agent, this.tracker, op, shot?.begin.bind(shot));
    this.onSettle?.('navigate', settle);
    const [outcome, capture] = await Promise.all([
      captureObservation(this.agent, this.revisions, op, { offset: 0, settle }),
      shot?.settled(),
    ]);
    return withCapture(this.withBlocked(outcome, blockedBefore), capture);
  }

  private async observeNow(
    args: ReturnType<typeof observeArgsSchema.parse>,
    op: Operation,
  ): Promise<ToolOutcome> {
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
    const read = () => captureObservation(this.agent, this.revisions, op, { offset, settle: null });
    return args.wait_for === undefined ? read() : observeUntil(read, args.wait_for, op);
  }

  private async actNow(args: ActArgs, op: Operation, options: EffectOptions): Promise<EffectOutcome> {
    if (
      (args.action === 'fill' || args.action === 'select' || args.action === 'press') &&
      args.text === undefined
    ) {
      throw new BrowserToolError('invalid_arguments', `${args.action} needs text`);
    }
    op.throwIfEnded('the action');
    if (args.revision !== this.revisions.current) {
      throw new BrowserToolError('page_changed', 'the revision is not the current one; observe again');
    }
    const target = await targetFor(this.page, this.agent, args, op);
    try {
      await op.beforeDispatch('the action');
    } catch (error) {
      await target.element.dispose().catch(() => undefined);
      throw error;
    }
    const blockedBefore = this.fence.blocked();
    try {
      await dispatch(target.element, args, target.selectBy, op);
    } catch (error) {
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
      await target.element.dispose().catch(() => undefined);
    }
    // ADR-0130 d6: the settled page is returned; no earlier reference survives the action.
    this.revisions.current = null;
    const shot = this.settledCapture(options, op);
    const settle = await settlePage(this.page, this.agent, this.tracker, op, shot?.begin.bind(shot));
    this.onSettle?.('act', settle);
    if (this.navigationBlockedSince(blockedBefore)) throw disallowedRedirect(undefined);
    const read = () => captureObservation(this.agent, this.revisions, op, { offset: 0, settle });
    try {
      // The screenshot is the settled page the answer's observation describes: taken beside that
      // observation (one read), or after the postcondition's polls end on theirs.
      const postcondition = args.postcondition;
      const [outcome, capture] =
        postcondition === undefined
          ? await Promise.all([read(), shot?.settled()])
          : [await observeUntil(read, postcondition, op), await shot?.settled()];
      return withCapture(this.withBlocked(outcome, blockedBefore), capture);
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

  /** Issue 13: the settled page's screenshot, begun while the page settles (see SettledCapture). */
  private settledCapture(options: EffectOptions, op: Operation): SettledCapture | undefined {
    return options.screenshot
      ? new SettledCapture(this.capture, this.agent, op.deadlineMs, op.signal)
      : undefined;
  }

  private navigationBlockedSince(before: BlockedCounts): boolean {
    return this.fence.blocked().navigation !== before.navigation;
  }

  /**
   * Issue 11.2/11.3: what the fence blocked during the call besides the page's own navigation —
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

function withCapture(outcome: ToolOutcome, capture: Capture | undefined): EffectOutcome {
  return capture === undefined ? outcome : { ...outcome, capture };
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
