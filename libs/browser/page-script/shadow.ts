/**
 * Open shadow roots (issue 14). The page agent walks them in composed order the way it walks
 * same-origin frames: a host's shadow root comes right after the host, before the host's light
 * descendants (the light children a slot shows are found there, where the host's tree has them).
 * Closed shadow roots stay unseen: the page keeps them from every script, ours included.
 */

export type Root = Document | ShadowRoot;

/**
 * The elements of `root` that host an open shadow root, in document order; nested roots are not
 * searched here. One native query and a property read per element: cheaper than a TreeWalker,
 * and a page of 5,000 elements pays well under a millisecond for it.
 */
export function shadowHostsIn(root: Root): Element[] {
  const hosts: Element[] = [];
  const all = root.querySelectorAll('*');
  for (let i = 0; i < all.length; i += 1) {
    const element = all[i] as Element;
    if (element.shadowRoot !== null) hosts.push(element);
  }
  return hosts;
}

/**
 * The elements of `root` matching `selector`, with each open shadow root's own matches inlined
 * after its host (recursively), in composed order. `visit` is called per element and may answer
 * false to stop the walk (a bound was reached); the answer says whether the walk went to the end.
 */
export function walkComposed(root: Root, selector: string, visit: (element: Element) => boolean): boolean {
  const matches = root.querySelectorAll(selector);
  const hosts = shadowHostsIn(root);
  if (hosts.length === 0) {
    for (let i = 0; i < matches.length; i += 1) if (!visit(matches[i] as Element)) return false;
    return true;
  }
  let next = 0;
  const intoShadow = (host: Element): boolean => walkComposed(host.shadowRoot as ShadowRoot, selector, visit);
  for (let i = 0; i < matches.length; i += 1) {
    const element = matches[i] as Element;
    // Hosts before this element in document order (its ancestors included) are walked first.
    while (next < hosts.length) {
      const host = hosts[next] as Element;
      if (host === element || !(host.compareDocumentPosition(element) & Node.DOCUMENT_POSITION_FOLLOWING))
        break;
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

/** `root` and every open shadow root inside it, nested ones too, in composed order. */
export function rootsWithin(root: Root): Root[] {
  const roots: Root[] = [root];
  for (const host of shadowHostsIn(root)) roots.push(...rootsWithin(host.shadowRoot as ShadowRoot));
  return roots;
}
