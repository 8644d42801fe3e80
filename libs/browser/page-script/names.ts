/**
 * Accessible names (faster, never different). Most controls on a page are links, buttons
 * and headings whose only children are text: for those, dom-accessibility-api's whole algorithm
 * comes down to their text between the element's CSS `content` twice, and it is computed here
 * directly. Every other element, and any of those with an attribute or a child the algorithm would
 * read, goes to the library. test/browser/observe-output.test.ts pins the names both ways.
 */
import { computeAccessibleName } from 'dom-accessibility-api';

/** The computed style of an element, as one capture reads it (page-agent.ts stylesOfCapture). */
export type StyleOf = (element: Element) => CSSStyleDeclaration;

const HTML_NAMESPACE = 'http://www.w3.org/1999/xhtml';
const NAMED_FROM_TEXT = new Set(['a', 'button', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
/**
 * Attributes the library reads on the way to a name from content: hidden and aria-hidden (step 2A),
 * aria-labelledby (2B), aria-label (2C), role (the role decides 2D–2F), aria-owns (children it
 * adds), title (the tooltip when the content is empty).
 */
const NAMING_ATTRIBUTES = [
  'hidden',
  'aria-hidden',
  'aria-labelledby',
  'aria-label',
  'role',
  'aria-owns',
  'title',
];
const TEXT_NODE = 3;
const COMMENT_NODE = 8;

/**
 * The library's name for a plain link, button or heading; null when the element is not one.
 * Plain: an HTML `<a href>`, `<button>` with no label, or `<h1>`–`<h6>`, none of the attributes
 * above, and only text and comments as children. The agent names visible elements only, so the
 * library's own test of the element's display and visibility (step 2A) passes as well. The library then takes the element's
 * `content` (its `::before` and `::after` styles are the element's own here, see the agent's
 * style cache), a space, each text child, a space, the `content` again, trims, and flattens runs of
 * white space (`asFlatString`).
 */
function plainName(element: Element, styleOf: StyleOf): string | null {
  const name = element.localName;
  if (!NAMED_FROM_TEXT.has(name) || element.namespaceURI !== HTML_NAMESPACE) return null;
  if (name === 'a' && !element.hasAttribute('href')) return null;
  for (const attribute of NAMING_ATTRIBUTES) if (element.hasAttribute(attribute)) return null;
  if (name === 'button' && (element as HTMLButtonElement).labels.length > 0) return null;
  let text = '';
  for (let child = element.firstChild; child !== null; child = child.nextSibling) {
    if (child.nodeType === TEXT_NODE) text += (child as Text).data;
    else if (child.nodeType !== COMMENT_NODE) return null;
  }
  const content = textualContent(styleOf(element));
  return `${content} ${text} ${content}`.trim().replace(/\s\s+/g, ' ');
}

/** dom-accessibility-api's getTextualContent: a quoted `content` value, unquoted; else nothing. */
function textualContent(style: CSSStyleDeclaration): string {
  const content = style.getPropertyValue('content');
  return /^["'].*["']$/.test(content) ? content.slice(1, -1) : '';
}

/** The element's accessible name as dom-accessibility-api computes it with `styleOf`. */
export function accessibleName(element: Element, styleOf: StyleOf): string {
  return plainName(element, styleOf) ?? computeAccessibleName(element, { getComputedStyle: styleOf });
}
