import type { Page } from 'playwright-core';
import type { PersonInputEvent } from '../contracts/index.js';
import { type DialogWatch, untilDialog } from './dialogs.js';
import { type Operation, within } from './operation.js';

/**
 * A person's input on the current tab, event by event, through DevTools' input events
 * (Playwright's mouse and keyboard): what a person's own mouse and keyboard would send, never a
 * DevTools command, a file drag or a file chooser. Navigations it causes meet the origin fence as
 * any of the page's do. A key name the keyboard does not know is skipped (a browser reports some,
 * say `Unidentified`, that no page could receive either). A `dialog` event answers the tab's open
 * dialog, and is skipped when none is open (it was answered or left meanwhile: the live view says
 * so). The contents are never logged.
 */
export async function dispatchPersonInput(
  tab: { page: Page; dialogs: DialogWatch },
  events: readonly PersonInputEvent[],
  op: Operation,
): Promise<void> {
  for (const event of events) {
    op.throwIfEnded('the input');
    if (event.type === 'dialog') {
      if (tab.dialogs.open !== null)
        await tab.dialogs.answer(event.accept ? 'accept' : 'dismiss', event.text).catch(() => undefined);
      continue;
    }
    // A page held by a dialog takes no other input until it is answered: the batch ends there, at
    // once when the dialog opens under one of its events (that event reached the page).
    if (tab.dialogs.open !== null) return;
    const sent = await within(
      dispatchOne(tab.page, event),
      op.deadlineMs,
      untilDialog(op, tab.dialogs).signal,
    );
    if (!sent.done) return;
  }
}

async function dispatchOne(page: Page, event: PersonInputEvent): Promise<void> {
  switch (event.type) {
    case 'mouse': {
      await page.mouse.move(event.x, event.y);
      const options = { button: event.button ?? 'left', clickCount: event.clicks ?? 1 } as const;
      if (event.action === 'down') await page.mouse.down(options);
      else if (event.action === 'up') await page.mouse.up(options);
      return;
    }
    case 'wheel':
      await page.mouse.move(event.x, event.y);
      await page.mouse.wheel(event.dx, event.dy);
      return;
    case 'key':
      try {
        if (event.action === 'down') await page.keyboard.down(event.key);
        else await page.keyboard.up(event.key);
      } catch (error) {
        if (!(error instanceof Error && /Unknown key/i.test(error.message))) throw error;
      }
      return;
    case 'text':
      await page.keyboard.insertText(event.text);
      return;
    case 'dialog':
      // Answered by the caller, which holds the tab's dialogs.
      return;
  }
}
