/**
 * A document's rendered text as far as the observation keeps it. `body.innerText` lays
 * out the text of the whole page, and a long page's is mostly cut off: on the 5,000-element bench
 * page it was a seventh of a capture. The text here is read block by block, in order, until there
 * is enough; a block is read whole with its own innerText when that is short, else in turn by its
 * own blocks.
 *
 * innerText separates block-level boxes by required line breaks, and the agent normalizes every
 * run of white space holding a line break to one, so a block's text joined to its siblings' by a
 * line break reads the same once normalized. Where an element's children are anything but such
 * blocks (inline content, text, floats, positioned boxes, boxes that hide themselves but show
 * their children), the element is read whole, as before.
 */

import type { StyleOf } from './names.js';

/** Collapsible white space: a text node of only these between blocks renders nothing. */
const COLLAPSIBLE_ONLY = /^[ \t\n\r\f]*$/;
/** Block-level boxes in block flow: innerText puts a required line break before and after each. */
const FLOW_BLOCKS = new Set(['block', 'list-item', 'flow-root']);
/** Blocks read by their own blocks in turn: a list item's marker is left to its innerText. */
const SPLIT_BLOCKS = new Set(['block', 'flow-root']);
const IN_FLOW = new Set(['static', 'relative', 'sticky']);
/**
 * Elements read whole even as blocks: controls, replaced elements and those whose rendering hides
 * or adds content (innerText gives some of them text of their own), and custom elements, which
 * may host a closed shadow root.
 */
const READ_WHOLE = new Set([
  'audio',
  'button',
  'canvas',
  'details',
  'dialog',
  'embed',
  'fieldset',
  'frame',
  'iframe',
  'img',
  'input',
  'legend',
  'meter',
  'object',
  'optgroup',
  'option',
  'progress',
  'select',
  'slot',
  'summary',
  'textarea',
  'video',
]);
const HTML_NAMESPACE = 'http://www.w3.org/1999/xhtml';
const ELEMENT_NODE = 1;
const TEXT_NODE = 3;

/**
 * Rendered text as the observation reports it: each run of spaces (tabs, no-break spaces) as one
 * space, each run of white space holding a line break as one line break, trimmed.
 */
export function normalizeText(raw: string): string {
  return raw
    .replace(/[ \t\f\v\u00a0]+/g, ' ')
    .replace(/\s*\n\s*/g, '\n')
    .trim();
}

/** A block whose own text is read by innerText in place of its parent's. */
function isFlowBlock(element: Element, style: CSSStyleDeclaration): boolean {
  return (
    element.namespaceURI === HTML_NAMESPACE &&
    FLOW_BLOCKS.has(style.display) &&
    style.float === 'none' &&
    IN_FLOW.has(style.position) &&
    style.visibility === 'visible' &&
    style.contentVisibility === 'visible' &&
    element.checkVisibility()
  );
}

/** Neither `::before` nor `::after` adds text of its own to the element. */
function noGeneratedText(element: Element): boolean {
  const view = element.ownerDocument.defaultView ?? window;
  for (const pseudo of ['::before', '::after']) {
    const content = view.getComputedStyle(element, pseudo).content;
    if (content !== 'none' && content !== 'normal') return false;
  }
  return true;
}

/**
 * The rendered text of `body`: its innerText, or the text of its first blocks joined by line
 * breaks once that is longer than `limit` normalized, which normalizes to a prefix of the whole.
 */
export function documentText(
  body: HTMLElement,
  limit: number,
  styleOf: StyleOf,
  /** Whether the normalized form of `raw` is longer than `limit`. */
  passesLimit: (raw: string) => boolean,
): string {
  const parts: string[] = [];
  let rawLength = 0;
  // Normalizing never lengthens the text: it cannot pass the limit before the raw text does.
  let nextCheck = limit;
  let enough = false;
  const add = (text: string) => {
    parts.push(text);
    rawLength += text.length + 1;
    if (rawLength < nextCheck) return;
    nextCheck = 2 * rawLength;
    enough = passesLimit(parts.join('\n'));
  };
  /**
   * Reads the children of `element` as blocks, and answers true, when they are flow blocks (white
   * space, comments and what is not rendered aside); otherwise takes back what it read.
   */
  const readByBlocks = (element: Element): boolean => {
    const start = parts.length;
    const startLength = rawLength;
    for (let child = element.firstChild; child !== null && !enough; child = child.nextSibling) {
      if (child.nodeType === TEXT_NODE) {
        if (COLLAPSIBLE_ONLY.test((child as Text).data)) continue;
      } else if (child.nodeType !== ELEMENT_NODE) {
        continue;
      } else {
        const style = styleOf(child as Element);
        if (style.display === 'none') continue;
        if (isFlowBlock(child as Element, style)) {
          read(child as HTMLElement);
          continue;
        }
      }
      // Something other than blocks: the element is read whole after all.
      parts.length = start;
      rawLength = startLength;
      return false;
    }
    return true;
  };
  /** Whether `element` may be read by its blocks: a host's light children are not what it shows. */
  const divisible = (element: HTMLElement, style: CSSStyleDeclaration) =>
    SPLIT_BLOCKS.has(style.display) &&
    !READ_WHOLE.has(element.localName) &&
    !element.localName.includes('-') &&
    element.shadowRoot === null &&
    noGeneratedText(element);
  const read = (element: HTMLElement) => {
    // textContent is cheap and about as long as the rendered text at most: a block whose
    // textContent is shorter than what is still needed is read whole, its children unlooked at.
    const long = (element.textContent?.length ?? 0) > nextCheck - rawLength;
    if (long && divisible(element, styleOf(element)) && readByBlocks(element)) return;
    // biome-ignore lint/performance/useDomNodeTextContent: innerText is the rendered text; textContent would include hidden nodes.
    add(element.innerText ?? '');
  };
  const style = styleOf(body);
  if (body.localName === 'body' && style.visibility === 'visible' && body.checkVisibility()) read(body);
  // biome-ignore lint/performance/useDomNodeTextContent: as above.
  else add(body.innerText ?? '');
  return parts.join('\n');
}
