/**
 * Open shadow roots and same-origin frames. The page agent walks shadow roots in
 * composed order the way it walks frames: a host's shadow root comes right after the host, before
 * the host's light descendants (the light children a slot shows are found there, where the host's
 * tree has them). Closed shadow roots stay unseen: the page keeps them from every script, ours too.
 */

export type Root = Document | ShadowRoot;

const DOCUMENT_NODE = 9;

/**
 * A document's elements less the commonest of those that can never host a shadow root: only an
 * HTML element that is a custom element or one of article, aside, blockquote, body, div, footer,
 * h1-h6, header, main, nav, p, section and span can (DOM's attachShadow, which declarative roots
 * follow too). The list is short: a query testing every tag that cannot cost more than it saved.
 */
const MAYBE_HOSTS =
  ':not(a,abbr,b,br,button,code,dd,dl,dt,em,i,img,input,label,li,link,meta,ol,option,path,script,' +
  'small,strong,style,svg,table,tbody,td,th,thead,tr,ul)';

/** What the page scan needs from the agent, passed in so this file stays free of its state. */
export interface ScanRules {
  /** A frame's document when it is of the same origin and loaded; null otherwise. */
  frameDocument(frame: Element): Document | null;
  isVisible(element: Element): boolean;
}

/** The page's roots, found in one pass over each: what a capture and the quiet watch read. */
export interface PageScan {
  /** Documents (same-origin frames at their place) and open shadow roots, in composed order. */
  roots: Root[];
  /** Roots inside a frame that is not rendered: their text is no part of the page's. */
  unrendered: Set<Root>;
  /** The open shadow hosts of each root, in document order (nested roots have their own). */
  hosts: Map<Root, Element[]>;
}

/**
 * Every root of the page in one pass over each: a capture scans once and its parts (candidates,
 * text) share the answer, where each used to search the page again.
 */
export function scanPage(top: Document, rules: ScanRules): PageScan {
  const scan: PageScan = { roots: [], unrendered: new Set(), hosts: new Map() };
  const visit = (root: Root, rendered: boolean): void => {
    scan.roots.push(root);
    if (!rendered) scan.unrendered.add(root);
    const hosts: Element[] = [];
    scan.hosts.set(root, hosts);
    // A document is read by native queries and one property read per element for hosts (0.6 ms
    // for 5,000 elements; reading each one's name too cost 5 ms), leaving out the elements that
    // can never host a shadow root (each element the agent reads needs a wrapper in its
    // world, made again after a GC). A shadow root is mostly small, and a query's own cost is then
    // what counts: one pass reads all it needs.
    const small = root.nodeType !== DOCUMENT_NODE;
    const all = root.querySelectorAll(small ? '*' : MAYBE_HOSTS);
    const frames: Element[] = [];
    for (let i = 0; i < all.length; i += 1) {
      const element = all[i] as Element;
      if (element.shadowRoot !== null) hosts.push(element);
      else if (small && (element.localName === 'iframe' || element.localName === 'frame'))
        frames.push(element);
    }
    if (!small) frames.push(...root.querySelectorAll('iframe,frame'));
    // Shadow roots and frames in composed order: merge the two lists (both in document order).
    let h = 0;
    const intoHost = (host: Element) => visit(host.shadowRoot as ShadowRoot, rendered);
    for (const frame of frames) {
      while (
        h < hosts.length &&
        (hosts[h] as Element).compareDocumentPosition(frame) & Node.DOCUMENT_POSITION_FOLLOWING
      ) {
        intoHost(hosts[h] as Element);
        h += 1;
      }
      const inner = rules.frameDocument(frame);
      if (inner) visit(inner, rendered && rules.isVisible(frame));
    }
    for (; h < hosts.length; h += 1) intoHost(hosts[h] as Element);
  };
  visit(top, true);
  return scan;
}

/**
 * The elements of `root` matching `selector`, with each open shadow root's own matches inlined
 * after its host (recursively), in composed order. `visit` answers false to stop the walk (a
 * bound was reached); the answer says whether the walk went to the end.
 */
export function walkComposed(
  root: Root,
  selector: string,
  hostsOf: (root: Root) => readonly Element[],
  visit: (element: Element) => boolean,
): boolean {
  const matches = root.querySelectorAll(selector);
  const hosts = hostsOf(root);
  if (hosts.length === 0) {
    for (let i = 0; i < matches.length; i += 1) if (!visit(matches[i] as Element)) return false;
    return true;
  }
  let next = 0;
  const intoShadow = (host: Element) => walkComposed(host.shadowRoot as ShadowRoot, selector, hostsOf, visit);
  for (let i = 0; i < matches.length; i += 1) {
    const element = matches[i] as Element;
    // Hosts before this element in document order (its ancestors included) are walked first.
    while (next < hosts.length) {
      const host = hosts[next] as Element;
      if (host === element || !(host.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING)) {
        break;
      }
      next += 1;
      if (!intoShadow(host)) return false;
    }
    if (!visit(element)) return false;
    if (hosts[next] === element) {
      next += 1;
      if (!intoShadow(element)) return false;
    }
  }
  for (; next < hosts.length; next += 1) if (!intoShadow(hosts[next] as Element)) return false;
  return true;
}
