import { randomBytes } from 'node:crypto';
import type { CDPSession, Dialog, Page } from 'playwright-core';
import type { BrowserObservation, SettleResult } from '../contracts/index.js';
import { BrowserToolError } from './errors.js';
import { evidenceKey } from './evidence-key.js';
import type { RevisionState, ToolOutcome } from './observation.js';
import { Operation, within } from './operation.js';

/** A dialog's message is shown clipped to this many characters. */
export const DIALOG_MESSAGE_LIMIT_CHARS = 200;
/** How long the page's title is asked of the browser while a dialog blocks the page's own scripts. */
const TITLE_BOUND_MS = 1_000;
const DIALOG_TYPES = ['alert', 'confirm', 'prompt', 'beforeunload'] as const;
type DialogType = (typeof DIALOG_TYPES)[number];

export type ObservedDialog = NonNullable<BrowserObservation['dialog']>;

/**
 * The dialogs of one page. Listening is what keeps a dialog open: Playwright dismisses
 * one at once only when nobody listens. An open dialog blocks the page's scripts — the agent's
 * calls, Playwright's evaluations and its click all wait until it is answered — so while one is
 * open the engine observes without calling into the page, and every wait that would call in is cut
 * short through {@link openedSignal}.
 */
export class DialogWatch {
  #open: Dialog | null = null;
  #opened = new AbortController();
  #session: Promise<CDPSession> | undefined;
  readonly #changes = new Set<() => void>();
  readonly #onDialog = (dialog: Dialog) => {
    this.#open = dialog;
    this.#opened.abort();
    this.#changed();
  };

  constructor(private readonly page: Page) {
    page.on('dialog', this.#onDialog);
  }

  /** The dialog waiting for an answer, if any. */
  get open(): Dialog | null {
    return this.#open;
  }

  /**
   * Tells `listener` whenever a dialog opens or is answered (the live view shows it: a screencast
   * never paints one); answers the call that stops telling.
   */
  onChange(listener: () => void): () => void {
    this.#changes.add(listener);
    return () => this.#changes.delete(listener);
  }

  /** Aborts when a dialog opens (at once when one is open already). */
  openedSignal(): AbortSignal {
    if (this.#open === null && this.#opened.signal.aborted) this.#opened = new AbortController();
    return this.#opened.signal;
  }

  /** How the observation shows the open dialog (the page engine strikes declared secrets from it). */
  observed(): ObservedDialog | undefined {
    const dialog = this.#open;
    if (dialog === null) return undefined;
    const type = dialog.type();
    const kind: DialogType = (DIALOG_TYPES as readonly string[]).includes(type)
      ? (type as DialogType)
      : 'alert';
    const message = clip(dialog.message(), DIALOG_MESSAGE_LIMIT_CHARS);
    return kind === 'prompt'
      ? {
          type: kind,
          message,
          default_value: clip(dialog.defaultValue(), DIALOG_MESSAGE_LIMIT_CHARS),
        }
      : { type: kind, message };
  }

  /**
   * Answers the open dialog: `accept` (with `text` for a prompt) or `dismiss`. Refused
   * `action_not_allowed` when none is open; the caller checks that before its effect watermark.
   */
  async answer(action: 'accept' | 'dismiss', text: string | undefined): Promise<void> {
    const dialog = this.#open;
    if (dialog === null) throw noDialog(action);
    this.#open = null;
    try {
      if (action === 'accept') await dialog.accept(dialog.type() === 'prompt' ? text : undefined);
      else await dialog.dismiss();
    } finally {
      this.#changed();
    }
  }

  /**
   * `accept` / `dismiss` as an act — an effect like any other: refused before the
   * caller's effect watermark when no dialog is open, and of unknown outcome when the answer fails.
   */
  async answerAsAct(action: 'accept' | 'dismiss', text: string | undefined, op: Operation): Promise<void> {
    if (this.#open === null) throw noDialog(action);
    await op.beforeDispatch('the answer to the dialog');
    try {
      await this.answer(action, text);
    } catch (error) {
      if (error instanceof BrowserToolError) throw error;
      throw new BrowserToolError('outcome_unknown', `the ${action} may or may not have taken effect`, false, {
        cause: error,
      });
    }
  }

  /**
   * The page's title from the browser, which keeps it while the page's scripts are blocked
   * (`page.title()` evaluates in the page and would wait for the dialog); '' when it cannot say.
   */
  async title(untilMs: number): Promise<string> {
    try {
      this.#session ??= this.page.context().newCDPSession(this.page);
      const session = await this.#session;
      const info = await within(
        session.send('Target.getTargetInfo'),
        Math.min(untilMs, Date.now() + TITLE_BOUND_MS),
      );
      return info.done ? info.value.targetInfo.title : '';
    } catch {
      this.#session = undefined;
      return '';
    }
  }

  /** Stops listening; a dialog nobody answered is dismissed, so the page is not left blocked. */
  async close(): Promise<void> {
    this.page.off('dialog', this.#onDialog);
    this.#changes.clear();
    const dialog = this.#open;
    this.#open = null;
    await dialog?.dismiss().catch(() => undefined);
    const session = this.#session;
    this.#session = undefined;
    await (await session?.catch(() => undefined))?.detach().catch(() => undefined);
  }

  #changed(): void {
    for (const listener of this.#changes) listener();
  }
}

/**
 * The call's operation, also ended when the page opens a dialog: a wait that would call
 * into the page (settling, capturing, an action Playwright holds until the dialog is answered)
 * stops then instead of running out the call's deadline.
 */
export function untilDialog(op: Operation, dialogs: DialogWatch): Operation {
  const opened = dialogs.openedSignal();
  return new Operation({
    deadlineMs: op.deadlineMs,
    signal: op.signal ? AbortSignal.any([op.signal, opened]) : opened,
  });
}

export function noDialog(action: string): BrowserToolError {
  return new BrowserToolError('action_not_allowed', `${action} is not allowed: no dialog is open`);
}

/**
 * The page while a dialog is open: its URL and title as the browser has them, the
 * dialog, and no elements — reading them would call into the blocked page. A new revision, so the
 * dialog is answered by the current revision as any act is.
 */
export async function observeWithDialog(
  page: Page,
  dialogs: DialogWatch,
  revisions: RevisionState,
  options: { settle: SettleResult | null; untilMs: number },
): Promise<ToolOutcome> {
  revisions.current = null;
  const title = await dialogs.title(options.untilMs);
  const dialog = dialogs.observed();
  const revision = randomBytes(9).toString('base64url');
  const observation: BrowserObservation = {
    url: page.url(),
    title,
    text: '',
    text_truncated: false,
    revision,
    settle: options.settle,
    elements: [],
    window: {
      offset: 0,
      count: 0,
      visible_seen: 0,
      candidates_checked: 0,
      candidate_limit_reached: false,
      continuation: null,
    },
    ...(dialog ? { dialog } : {}),
  };
  revisions.current = revision;
  // The loop breaker tells one dialog from another (the page behind it cannot be read).
  const key = evidenceKey({ ...observation, text: dialog ? `${dialog.type}\n${dialog.message}` : '' });
  return { observation, evidenceKey: key };
}

function clip(text: string, limit: number): string {
  return text.length <= limit ? text : text.slice(0, limit);
}
