/**
 * Where Playwright finds an element the page agent checked: a structural selector per document,
 * resolved by Playwright in its own utility world, so page code cannot redirect the lookup.
 */

/**
 * An element's place in its own document. `pierce` false: a light-DOM path for Playwright's
 * `css:light=` engine (`:root > :nth-child(2) > …`). `pierce` true: the element is inside open
 * shadow roots and the path is for `css=`, which pierces them. There `A > :nth-child(1)` would
 * match both A's first light child and the first child of A's shadow root (Playwright's `>` steps
 * from a shadow root's child to its host), so where A hosts a shadow root each step says which:
 * `:not(:light(* > *))`, no light parent, is the shadow root's child; `:light(* > *)` the light one.
 */
export interface ElementPath {
  selector: string;
  pierce: boolean;
}

/**
 * The element's path through each same-origin frame from the top document down (the `<iframe>`
 * elements), then the element's own in its document.
 */
export interface TargetPath {
  frames: ElementPath[];
  element: ElementPath;
}

const SHADOW_CHILD = ':not(:light(* > *))';
const LIGHT_CHILD = ':light(* > *)';

function indexAmong(children: HTMLCollection, node: Element): number {
  return Array.prototype.indexOf.call(children, node) + 1;
}

/** The element's path within its document, across open shadow roots; null when detached. */
export function elementPath(element: Element): ElementPath | null {
  const steps: string[] = [];
  const root = element.ownerDocument.documentElement;
  let pierce = false;
  let node = element;
  while (node !== root) {
    const parent = node.parentElement;
    if (parent) {
      const qualifier = parent.shadowRoot === null ? '' : LIGHT_CHILD;
      steps.push(`:nth-child(${indexAmong(parent.children, node)})${qualifier}`);
      node = parent;
      continue;
    }
    const shadow = node.parentNode;
    if (!isShadowRoot(shadow)) return null;
    pierce = true;
    steps.push(`:nth-child(${indexAmong(shadow.children, node)})${SHADOW_CHILD}`);
    node = shadow.host;
  }
  steps.push(':root');
  return { selector: steps.reverse().join(' > '), pierce };
}

/** By node type, not instanceof: a same-origin frame's nodes come from another realm. */
function isShadowRoot(node: Node | null): node is ShadowRoot {
  return node !== null && node.nodeType === Node.DOCUMENT_FRAGMENT_NODE && 'host' in node;
}

/** The element's path from the top document, through same-origin frames; null when detached. */
export function targetPath(element: Element): TargetPath | null {
  const path = elementPath(element);
  if (path === null) return null;
  const frames: ElementPath[] = [];
  let doc = element.ownerDocument;
  while (doc !== document) {
    const frame = doc.defaultView?.frameElement;
    const framePath = frame ? elementPath(frame) : null;
    if (!frame || framePath === null) return null;
    frames.unshift(framePath);
    doc = frame.ownerDocument;
  }
  return { frames, element: path };
}
