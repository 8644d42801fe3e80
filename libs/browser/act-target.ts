import type { ElementHandle, Page } from 'playwright-core';
import type { ActArgs } from '../contracts/index.js';
import { literal, type PageAgentWorld } from './agent-call.js';
import { BrowserToolError, isNavigationTeardown } from './errors.js';
import { frameWorldsOf, pathInPage } from './frame-worlds.js';
import { type Operation, within } from './operation.js';
import type { TargetAnswer, TargetPath } from './page-script/page-agent.js';
import { locatorAt } from './target-locator.js';

/**
 * Where an act lands: the page agent checks the observed element (revision, reference, whether it
 * can take the action) and names its structural path; Playwright then finds it by that path in its
 * own utility world and dispatches with its actionability checks on.
 */
/** An act's checked target: the element's handle and how a select names its option. */
export interface ActTarget {
  element: ElementHandle<Element>;
  selectBy: SelectBy;
}

/** The refusals that come before dispatch: stale revision, unknown element, disallowed action. */
export async function targetFor(
  page: Page,
  agent: PageAgentWorld,
  args: ActArgs,
  op: Operation,
  /** What the page agent checks the element for: the action, or `outline` (any enabled element). */
  checkAs: string = args.action,
): Promise<ActTarget> {
  // A reference into a frame of another origin is checked by that frame's agent.
  const route = frameWorldsOf(agent).route(args.revision, args.element);
  const call = `check(${literal(args.revision)}, ${literal(route.localRef)}, ${literal(checkAs)}, ${literal(args.text ?? null)}, ${literal(args.labels ?? null)})`;
  let answer: TargetAnswer;
  try {
    const checked = await within(route.world.call<TargetAnswer>(call), op.deadlineMs, op.signal);
    if (!checked.done)
      throw new BrowserToolError('provider_unavailable', 'the call ended before the action', true);
    answer = checked.value;
  } catch (error) {
    if (error instanceof BrowserToolError) throw error;
    if (isNavigationTeardown(error)) {
      throw new BrowserToolError('page_changed', 'the page changed document; observe again', false, {
        cause: error,
      });
    }
    throw error;
  }
  const verdict = answer.verdict;
  if (verdict === 'page_changed') {
    throw new BrowserToolError('page_changed', 'the page no longer holds that revision; observe again');
  }
  if (verdict.startsWith('action_not_allowed:')) {
    throw new BrowserToolError(
      'action_not_allowed',
      `${args.action} is not allowed: ${verdict.slice('action_not_allowed:'.length)}`,
    );
  }
  if (verdict === 'element_not_found' || answer.path === null) {
    throw new BrowserToolError('element_not_found', `element ${args.element} is not on the page any more`);
  }
  const selectBy: SelectBy = verdict === 'ok:value' ? 'value' : verdict === 'ok:labels' ? 'labels' : 'label';
  const element = await elementHandle(page, pathInPage(route, answer.path), args, op);
  return { element, selectBy };
}

/**
 * A handle on the checked element, found by its structural path ({@link locatorAt}). Playwright's
 * actionability checks then run in the element's own frame.
 */
async function elementHandle(
  page: Page,
  path: TargetPath,
  args: ActArgs,
  op: Operation,
): Promise<ElementHandle<Element>> {
  const locator = locatorAt(page, path);
  const notFound = () =>
    new BrowserToolError('element_not_found', `element ${args.element} is not on the page any more`);
  try {
    // The page agent found it a moment ago. One query answers at once either way: one that is
    // gone is told at once; one that is there is waited for as long as the act has (a renderer slow
    // under load is not a missing element: the chaos test saw a 1 s bound end runs
    // element_not_found on a page that had the button).
    const query = locator.elementHandles();
    const found = await within(query, op.deadlineMs, op.signal);
    if (!found.done) {
      // Handles that arrive after the act gave up are released, not left in the page.
      void query.then(release, () => undefined);
      throw new BrowserToolError(
        'provider_unavailable',
        'the call ended before the element could be reached',
        true,
      );
    }
    const [handle, ...others] = found.value;
    release(others);
    if (handle) return handle as ElementHandle<Element>;
  } catch (error) {
    if (error instanceof BrowserToolError) throw error;
    // The act's time ran out while the page did not answer: nothing was dispatched.
    op.throwIfEnded('the element could be reached');
  }
  throw notFound();
}

function release(handles: readonly ElementHandle[]): void {
  for (const handle of handles) void handle.dispose().catch(() => undefined);
}

/** How `select` names its options: one label, one value, or every label of a multiple select. */
export type SelectBy = 'label' | 'value' | 'labels';

function selectOptions(
  args: ActArgs,
  selectBy: SelectBy,
): { label: string }[] | { value: string } | { label: string } {
  const text = args.text ?? '';
  if (selectBy === 'labels') return (args.labels ?? []).map((label) => ({ label }));
  return selectBy === 'label' ? { label: text } : { value: text };
}

/**
 * The file an `upload` sets a file input's files to: its bytes as the artifact store keeps them,
 * fetched by the caller once it knew the file is the run's (DESIGN §12).
 */
export interface UploadPayload {
  /** The uploaded file's id (`fil_…`): the act's `file` must name it. */
  id: string;
  name: string;
  mimeType: string;
  buffer: Buffer;
}

export async function dispatch(
  element: ElementHandle<Element>,
  args: ActArgs,
  selectBy: SelectBy,
  op: Operation,
  upload?: UploadPayload,
): Promise<void> {
  const timeout = Math.max(1, op.remainingMs());
  const text = args.text ?? '';
  // Playwright's actionability checks (visible, stable, enabled, receiving events) stay on.
  const action = (() => {
    switch (args.action) {
      case 'click':
        return element.click({ timeout });
      case 'fill':
        return element.fill(text, { timeout });
      case 'select':
        return element.selectOption(selectOptions(args, selectBy), { timeout });
      case 'press':
        return element.press(text, { timeout });
      case 'check':
        return element.check({ timeout });
      case 'uncheck':
        return element.uncheck({ timeout });
      case 'upload':
        if (!upload) throw new BrowserToolError('invalid_arguments', 'upload needs a file of the run');
        // The page agent checked the element is a file input; Playwright sets its files as a
        // person's choice would, firing input and change.
        return element.setInputFiles(
          { name: upload.name, mimeType: upload.mimeType, buffer: upload.buffer },
          { timeout },
        );
      case 'accept':
      case 'dismiss':
        throw new BrowserToolError('invalid_arguments', `${args.action} answers a dialog, not an element`);
      default: {
        const unknown: never = args.action;
        throw new BrowserToolError('invalid_arguments', `unknown action ${String(unknown)}`);
      }
    }
  })();
  const done = await within(
    Promise.resolve(action).then(() => true),
    op.deadlineMs,
    op.signal,
  );
  if (!done.done) throw new Error('the action did not complete before the call ended');
}
