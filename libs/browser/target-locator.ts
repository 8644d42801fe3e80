import type { FrameLocator, Locator, Page } from 'playwright-core';
import type { ElementPath, TargetPath } from './page-script/page-agent.js';

/**
 * Where Playwright finds an element the page agent named by its structural path, through the
 * frames on the way, in Playwright's own utility world: page code can neither patch
 * the lookup nor hand over another element. Used to act on an element and to find the `<iframe>`
 * of a frame of another origin.
 */
export function locatorAt(page: Page, path: TargetPath): Locator {
  let scope: Pick<FrameLocator, 'locator' | 'frameLocator'> = page;
  for (const frame of path.frames) scope = scope.frameLocator(playwrightSelector(frame));
  return scope.locator(playwrightSelector(path.element));
}

/**
 * A light-DOM path goes to `css:light=`, which cannot be redirected into a shadow root; a path
 * across open shadow roots to `css=`, which pierces them (see ElementPath for why each
 * of its steps is unique).
 */
function playwrightSelector(path: ElementPath): string {
  return `${path.pierce ? 'css' : 'css:light'}=${path.selector}`;
}
