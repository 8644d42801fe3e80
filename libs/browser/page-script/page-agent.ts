/**
 * The page side of the engine, bundled with dom-accessibility-api into one script and injected once
 * per document (page-script/bundle.ts) into an isolated world (agent-call.ts): it sees
 * the page's DOM through its own, unpatched prototypes, and page code cannot see or call it. It only
 * reads the page: no attribute, node or style is ever written, so observing cannot disturb the page
 * or the DOM-quiet watch (ADR-0159). Element references live in a closure, keyed by revision, as
 * weak references.
 */
import { CANDIDATE_SELECTOR } from './candidates.js';
import { documentText, normalizeText } from './document-text.js';
import { accessibleName, type StyleOf } from './names.js';
import { PAGE_AGENT_GLOBAL } from './page-agent-global.js';
import { type ElementState, inputType, roleOf, stateOf } from './roles.js';
import { type PageScan, type Root, scanPage, walkComposed } from './shadow.js';
import { type TargetPath, targetPath } from './target-path.js';
import { type TargetCheck, verdictFor } from './verdict.js';

export type { ElementPath, TargetPath } from './target-path.js';
export type { TargetCheck } from './verdict.js';

export interface CaptureRequest {
  revision: string;
  /** Index in the visible elements where the window starts. */
  offset: number;
  windowSize: number;
  candidateLimit: number;
  textLimit: number;
  nameLimit: number;
  /**
   * Report where each visible frame of another origin sits (see {@link FrameSlot}). The
   * main frame's agent asks; a child frame's does not, so such frames nest one level only.
   */
  frameSlots?: boolean;
}

/**
 * A visible frame this document cannot read (another origin): its content is captured by the
 * frame's own agent (frame-worlds.ts) and inlined here, before the visible element numbered `at`.
 */
export interface FrameSlot {
  at: number;
  path: TargetPath;
}

export interface CapturedElement {
  ref: string;
  role: string;
  name: string;
  /** An input's type where the role does not say it (see observedElementSchema). */
  input_type?: string;
  state: ElementState;
}

export interface Capture {
  url: string;
  title: string;
  text: string;
  textTruncated: boolean;
  elements: CapturedElement[];
  offset: number;
  visibleSeen: number;
  candidatesChecked: number;
  candidateLimitReached: boolean;
  /** The top document's scroll position and size (CSS pixels). */
  scroll?: {
    x: number;
    y: number;
    width: number;
    height: number;
    viewport_width: number;
    viewport_height: number;
  };
  /** The frames of other origins, in document order, when the request asked. */
  frames?: FrameSlot[];
}

/** The verdict on an action's target and, when it may go ahead, where the target is. */
export interface TargetAnswer {
  verdict: TargetCheck;
  path: TargetPath | null;
}

const FRAME_SELECTOR = 'iframe,frame';

interface Registry {
  revision: string;
  refs: Map<string, WeakRef<Element>>;
}

let registry: Registry | null = null;

/**
 * The computed style the accessible-name computation reads, one declaration per element for the
 * whole capture: the page does not change while a capture runs (it is one synchronous task), and a
 * declaration is live, so it answers what a fresh one would. dom-accessibility-api asks again for
 * every name it computes, and for `::before` and `::after` (answered with the element's own style,
 * as it always was here), so most of its calls were repeats.
 */
function stylesOfCapture(): StyleOf {
  const styles = new Map<Element, CSSStyleDeclaration>();
  return (element) => {
    let style = styles.get(element);
    if (style === undefined) {
      const view = element.ownerDocument.defaultView ?? window;
      style = view.getComputedStyle(element);
      styles.set(element, style);
    }
    return style;
  };
}

/** One options object for every visibility check, not one made per element. */
const VISIBILITY_PROPERTY = { visibilityProperty: true } as const;

/** Rendered with a box and not visibility-hidden: the same notion as Playwright's isVisible(). */
function isVisible(element: Element): boolean {
  if (!element.checkVisibility(VISIBILITY_PROPERTY)) return false;
  const rect = element.getBoundingClientRect();
  return rect.width > 0 && rect.height > 0;
}

function sameOriginDocument(frame: Element): Document | null {
  try {
    const doc = (frame as HTMLIFrameElement).contentDocument;
    return doc?.documentElement ? doc : null;
  } catch {
    return null;
  }
}

/** The page's roots, open shadow roots and same-origin frames included, found in one pass. */
function scan(): PageScan {
  return scanPage(document, { frameDocument: sameOriginDocument, isVisible });
}

const CANDIDATES_AND_FRAMES = `:is(${CANDIDATE_SELECTOR},${FRAME_SELECTOR})`;

/**
 * Visible candidates in composed order: open shadow roots after their host, frames of the same
 * origin at their position. The candidate bound holds across all of them.
 */
function collectVisible(
  page: PageScan,
  limit: number,
  slots: FrameSlot[] | null = null,
): { visible: Element[]; checked: number; limitReached: boolean } {
  const visible: Element[] = [];
  let checked = 0;
  let limitReached = false;
  const hostsOf = (root: Root) => page.hosts.get(root) ?? [];
  const visit = (element: Element): boolean => {
    if (element.localName === 'iframe' || element.localName === 'frame') {
      const inner = sameOriginDocument(element);
      if (inner)
        return isVisible(element) ? walkComposed(inner, CANDIDATES_AND_FRAMES, hostsOf, visit) : true;
      const path = slots !== null && isVisible(element) ? targetPath(element) : null;
      if (path) slots?.push({ at: visible.length, path });
      return true;
    }
    if (checked === limit) {
      limitReached = true;
      return false;
    }
    checked += 1;
    if (isVisible(element)) visible.push(element);
    return true;
  };
  walkComposed(document, CANDIDATES_AND_FRAMES, hostsOf, visit);
  return { visible, checked, limitReached };
}

function clip(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

/**
 * `normalizeText(raw)`, or a prefix of it longer than `limit` (the text of a long page is
 * mostly cut off, and normalizing all of it cost as much as reading it). Normalizing rewrites each
 * run of white space on its own, so the normalized form of a prefix of `raw` is a prefix of the
 * normalized whole: both agree up to the prefix's last character that is not white space, where
 * the trimmed form of the prefix ends.
 */
function normalizedText(raw: string, limit: number): string {
  for (let cut = 4 * limit; cut < raw.length; cut *= 2) {
    const text = normalizeText(raw.slice(0, cut));
    if (text.length > limit) return text;
  }
  return normalizeText(raw);
}

/**
 * The rendered text of a root. A document's body's innerText leaves out its shadow roots' text,
 * so each open shadow root adds its own: the innerText of its rendered children (a child that is
 * not rendered, such as a <style>, would answer its source instead, so it is left out).
 */
function renderedText(root: Root, limit: number, styleOf: StyleOf): string {
  if (root.nodeType === Node.DOCUMENT_NODE) {
    const body = (root as Document).body;
    const passesLimit = (raw: string) => normalizedText(raw, limit).length > limit;
    return body ? documentText(body, limit, styleOf, passesLimit) : '';
  }
  const parts: string[] = [];
  for (const child of root.children) {
    // biome-ignore lint/performance/useDomNodeTextContent: as above.
    if (child.checkVisibility()) parts.push((child as HTMLElement).innerText ?? '');
  }
  return parts.join('\n');
}

/** The page's rendered text: each document's, then its open shadow roots', then its frames'. */
function visibleText(page: PageScan, limit: number, styleOf: StyleOf): { text: string; truncated: boolean } {
  const parts: string[] = [];
  let length = 0;
  for (const root of page.roots) {
    if (length > limit) break;
    if (page.unrendered.has(root)) continue;
    // A part longer than the limit is the last one kept, and it is cut to the limit below.
    const text = normalizedText(renderedText(root, limit, styleOf), limit);
    if (text) {
      parts.push(text);
      length += text.length + 1;
    }
  }
  const joined = parts.join('\n');
  return joined.length <= limit
    ? { text: joined, truncated: false }
    : { text: joined.slice(0, limit), truncated: true };
}

/** The top document's scroll position and size, in whole CSS pixels. */
function scrollOf(): NonNullable<Capture['scroll']> {
  const page = document.documentElement;
  const whole = (value: number) => Math.max(0, Math.round(value));
  return {
    x: whole(window.scrollX),
    y: whole(window.scrollY),
    width: whole(Math.max(page.scrollWidth, document.body?.scrollWidth ?? 0)),
    height: whole(Math.max(page.scrollHeight, document.body?.scrollHeight ?? 0)),
    viewport_width: whole(window.innerWidth),
    viewport_height: whole(window.innerHeight),
  };
}

function capture(request: CaptureRequest): Capture {
  const page = scan();
  const slots: FrameSlot[] | null = request.frameSlots ? [] : null;
  const { visible, checked, limitReached } = collectVisible(page, request.candidateLimit, slots);
  const offset = Math.min(request.offset, visible.length);
  const windowElements = visible.slice(offset, offset + request.windowSize);
  const refs = new Map<string, WeakRef<Element>>();
  const styleOf = stylesOfCapture();
  const elements: CapturedElement[] = windowElements.map((element, index) => {
    const ref = `e${offset + index + 1}`;
    refs.set(ref, new WeakRef(element));
    const state = stateOf(element, request.nameLimit);
    const name = accessibleName(element, styleOf).trim();
    const type = inputType(element);
    return {
      ref,
      role: roleOf(element),
      name: clip(name, request.nameLimit),
      ...(type === undefined ? {} : { input_type: type }),
      state,
    };
  });
  // The new revision replaces the old one: its references are released here (ADR-0130 d8).
  registry = { revision: request.revision, refs };
  const { text, truncated } = visibleText(page, request.textLimit, styleOf);
  return {
    // The page's own text, URL and title as they are (DESIGN §12): a secret field reports only that
    // it holds a value (roles.ts stateOf); a run's declared secrets are struck by the page engine.
    url: location.href,
    title: document.title,
    text,
    textTruncated: truncated,
    elements,
    offset,
    visibleSeen: visible.length,
    candidatesChecked: checked,
    candidateLimitReached: limitReached,
    scroll: scrollOf(),
    ...(slots?.length ? { frames: slots } : {}),
  };
}

function lookup(revision: string, ref: string): Element | 'page_changed' | 'element_not_found' {
  if (registry === null || registry.revision !== revision) return 'page_changed';
  const element = registry.refs.get(ref)?.deref();
  if (!element?.isConnected) return 'element_not_found';
  return element;
}

/**
 * The refusals of ADR-0130 d6 / DESIGN §6, decided before anything is dispatched, and where the
 * target is when the action may go ahead: one round trip, so the path is the checked element's.
 */
function check(
  revision: string,
  ref: string,
  action: string,
  text: string | null,
  labels: readonly string[] | null = null,
): TargetAnswer {
  const verdict = verdictOn(revision, ref, action, text, labels);
  if (!verdict.startsWith('ok')) return { verdict, path: null };
  const element = lookup(revision, ref);
  const path = typeof element === 'string' ? null : targetPath(element);
  return path === null ? { verdict: 'element_not_found', path: null } : { verdict, path };
}

function verdictOn(
  revision: string,
  ref: string,
  action: string,
  text: string | null,
  labels: readonly string[] | null,
): TargetCheck {
  const element = lookup(revision, ref);
  return typeof element === 'string' ? element : verdictFor(element, action, text, labels);
}

/** Forgets every reference: a capture that timed out may have left them half-made (ADR-0159). */
function invalidate(): void {
  registry = null;
}

/**
 * Resolves true after `quietMs` with no DOM mutation, false when `timeoutMs` passes first. Observes
 * only; a watch left in an outgoing document dies with it and its caller restarts in the new one.
 */
function waitQuiet(quietMs: number, timeoutMs: number): Promise<boolean> {
  return new Promise((resolvePromise) => {
    let quietTimer: ReturnType<typeof setTimeout> | undefined;
    const finish = (quiet: boolean) => {
      observer.disconnect();
      clearTimeout(quietTimer);
      clearTimeout(boundTimer);
      resolvePromise(quiet);
    };
    const restart = () => {
      clearTimeout(quietTimer);
      quietTimer = setTimeout(() => finish(true), quietMs);
    };
    const observer = new MutationObserver(restart);
    // Same-origin frames and open shadow roots are part of the observation, so their mutations
    // count too; an observer on a document does not see into its shadow roots, so each root is
    // observed. A shadow root attached after the watch began is not: its first mutations go
    // unseen until the host's own tree changes (acceptable: the watch is a settle heuristic).
    for (const root of scan().roots) {
      observer.observe(root, { subtree: true, childList: true, attributes: true, characterData: true });
    }
    const boundTimer = setTimeout(() => finish(false), Math.max(0, timeoutMs));
    restart();
  });
}

function readyState(): DocumentReadyState {
  return document.readyState;
}

const agent = { capture, check, invalidate, waitQuiet, readyState };
export type PageAgent = typeof agent;

// Defined in the isolated world's own global, which page code cannot reach.
if (!Object.hasOwn(globalThis, PAGE_AGENT_GLOBAL)) {
  Object.defineProperty(globalThis, PAGE_AGENT_GLOBAL, {
    value: Object.freeze(agent),
    enumerable: false,
    writable: false,
    configurable: false,
  });
}
