/**
 * The page side of the engine, bundled with dom-accessibility-api into one script and injected once
 * per document (page-script/bundle.ts) into an isolated world (agent-call.ts, issue 11.12): it sees
 * the page's DOM through its own, unpatched prototypes, and page code cannot see or call it. It only
 * reads the page: no attribute, node or style is ever written, so observing cannot disturb the page
 * or the DOM-quiet watch (ADR-0159). Element references live in a closure, keyed by revision, as
 * weak references.
 */
import { computeAccessibleName, getRole } from 'dom-accessibility-api';
import { PAGE_AGENT_GLOBAL } from './page-agent-global.js';

export interface CaptureRequest {
  revision: string;
  /** Index in the visible elements where the window starts. */
  offset: number;
  windowSize: number;
  candidateLimit: number;
  textLimit: number;
  nameLimit: number;
}

export interface CapturedElement {
  ref: string;
  role: string;
  name: string;
  /** Issue 14: an input's type where the role does not say it (see observedElementSchema). */
  input_type?: string;
  state: {
    disabled?: boolean;
    checked?: boolean | 'mixed';
    expanded?: boolean;
    selected?: boolean;
    value?: string;
    values?: string[];
    min?: number;
    max?: number;
    /** A secret field (password, one-time code): whether it holds a value, never the value. */
    value_present?: boolean;
  };
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
  /** Issue 14: the top document's scroll position and size (CSS pixels). */
  scroll?: {
    x: number;
    y: number;
    width: number;
    height: number;
    viewport_width: number;
    viewport_height: number;
  };
}

/**
 * Where Playwright finds an element for the action: structural selectors (`:root > :nth-child(2)
 * > …`) of each same-origin frame from the top document down, then of the element in its own
 * document. Playwright resolves them in its own utility world, so page code cannot redirect them.
 */
export interface TargetPath {
  frames: string[];
  selector: string;
}

/** The verdict on an action's target and, when it may go ahead, where the target is. */
export interface TargetAnswer {
  verdict: TargetCheck;
  path: TargetPath | null;
}

/** Why an element may not take an action, checked before anything is dispatched. */
export type TargetCheck =
  | 'ok'
  | 'ok:label'
  | 'ok:value'
  | 'page_changed'
  | 'element_not_found'
  | `action_not_allowed:${string}`;

/** Nodes that can be controls or landmarks a model acts on or reads by name. */
const CANDIDATE_SELECTOR = [
  'a[href]',
  'area[href]',
  'button',
  'input:not([type="hidden"])',
  'select',
  'textarea',
  'summary',
  '[role]',
  '[tabindex]:not([tabindex="-1"])',
  '[contenteditable=""]',
  '[contenteditable="true"]',
  'h1',
  'h2',
  'h3',
  'h4',
  'h5',
  'h6',
  'img[alt]:not([alt=""])',
].join(',');
const FRAME_SELECTOR = 'iframe,frame';

const TEXT_INPUT_TYPES = new Set(['', 'text', 'search', 'email', 'url', 'tel', 'number']);
const FILLABLE_INPUT_TYPES = new Set([
  ...TEXT_INPUT_TYPES,
  'password',
  'date',
  'time',
  'datetime-local',
  'month',
  'week',
]);

interface Registry {
  revision: string;
  refs: Map<string, WeakRef<Element>>;
}

let registry: Registry | null = null;

function styleOf(element: Element): CSSStyleDeclaration {
  const view = element.ownerDocument.defaultView ?? window;
  return view.getComputedStyle(element);
}

/** Rendered with a box and not visibility-hidden: the same notion as Playwright's isVisible(). */
function isVisible(element: Element): boolean {
  if (!element.checkVisibility({ visibilityProperty: true })) return false;
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

/** Visible candidates in document order, frames of the same origin inlined at their position. */
function collectVisible(limit: number): { visible: Element[]; checked: number; limitReached: boolean } {
  const visible: Element[] = [];
  let checked = 0;
  let limitReached = false;
  const walk = (doc: Document): void => {
    for (const element of doc.querySelectorAll(`${CANDIDATE_SELECTOR},${FRAME_SELECTOR}`)) {
      if (element.localName === 'iframe' || element.localName === 'frame') {
        const inner = sameOriginDocument(element);
        if (inner && isVisible(element)) walk(inner);
        if (limitReached) return;
        continue;
      }
      if (checked === limit) {
        limitReached = true;
        return;
      }
      checked += 1;
      if (isVisible(element)) visible.push(element);
    }
  };
  walk(document);
  return { visible, checked, limitReached };
}

function clip(text: string, limit: number): string {
  return text.length <= limit ? text : `${text.slice(0, limit - 1)}…`;
}

function ariaBoolean(element: Element, name: string): boolean | undefined {
  const value = element.getAttribute(name);
  if (value === 'true') return true;
  if (value === 'false') return false;
  return undefined;
}

function isDisabled(element: Element): boolean {
  if (element.matches(':disabled')) return true;
  return element.closest('[aria-disabled="true"]') !== null;
}

/** By tag name, not instanceof: elements of a same-origin frame come from another realm. */
function isInput(element: Element): element is HTMLInputElement {
  return element.localName === 'input';
}

/** `autocomplete` tokens that mark a text field as holding a secret. */
const SECRET_AUTOCOMPLETE = /\b(current-password|new-password|one-time-code)\b/i;

/**
 * Issue 11: a password field — or a field the page marks as one for a password or one-time
 * code — holds a secret whose value never leaves the browser.
 */
function isSecretField(element: Element): element is HTMLInputElement {
  if (!isInput(element)) return false;
  return element.type.toLowerCase() === 'password' || SECRET_AUTOCOMPLETE.test(element.autocomplete);
}

/** Secrets shorter than this are not looked for in other strings: they would match by chance. */
const SECRET_MATCH_MIN_CHARS = 3;

/**
 * The values of the document's secret fields (and its same-origin frames'), to be struck from
 * everything else the observation reports: an accessible name computed from content, another
 * field's value, the text, the title or the URL may repeat them.
 */
function secretValues(): string[] {
  const values = new Set<string>();
  const walk = (doc: Document): void => {
    for (const element of doc.querySelectorAll('input')) {
      if (isSecretField(element) && element.value.length >= SECRET_MATCH_MIN_CHARS) values.add(element.value);
    }
    for (const frame of doc.querySelectorAll(FRAME_SELECTOR)) {
      const inner = sameOriginDocument(frame);
      if (inner) walk(inner);
    }
  };
  walk(document);
  // Longest first, so a secret that contains another is struck whole.
  return [...values].sort((a, b) => b.length - a.length);
}

const REDACTED = '[secret]';

function redact(text: string, secrets: readonly string[]): string {
  let result = text;
  for (const secret of secrets) if (result.includes(secret)) result = result.split(secret).join(REDACTED);
  return result;
}

function stateOf(element: Element, nameLimit: number): CapturedElement['state'] {
  const state: CapturedElement['state'] = {};
  if (isDisabled(element)) state.disabled = true;
  if (isSecretField(element)) {
    state.value_present = element.value.length > 0;
  } else if (isInput(element)) {
    const type = element.type.toLowerCase();
    if (type === 'checkbox' || type === 'radio') {
      state.checked = element.indeterminate ? 'mixed' : element.checked;
    } else if (TEXT_INPUT_TYPES.has(type)) {
      state.value = clip(element.value, nameLimit);
    }
  } else if (element.localName === 'textarea') {
    state.value = clip((element as HTMLTextAreaElement).value, nameLimit);
  } else if (element.localName === 'select') {
    const select = element as HTMLSelectElement;
    state.value = clip(select.selectedOptions[0]?.label ?? '', nameLimit);
  } else {
    const checked = element.getAttribute('aria-checked');
    if (checked === 'true' || checked === 'false') state.checked = checked === 'true';
    else if (checked === 'mixed') state.checked = 'mixed';
  }
  const expanded = ariaBoolean(element, 'aria-expanded');
  if (expanded !== undefined) state.expanded = expanded;
  else if (element.localName === 'details') state.expanded = (element as HTMLDetailsElement).open;
  else if (element.localName === 'summary' && element.parentElement?.localName === 'details') {
    state.expanded = (element.parentElement as HTMLDetailsElement).open;
  }
  const selected = ariaBoolean(element, 'aria-selected');
  if (selected !== undefined) state.selected = selected;
  return state;
}

function roleOf(element: Element): string {
  return getRole(element) ?? 'generic';
}

function visibleText(limit: number): { text: string; truncated: boolean } {
  const parts: string[] = [];
  let length = 0;
  const add = (doc: Document): void => {
    if (length > limit) return;
    // biome-ignore lint/performance/useDomNodeTextContent: innerText is the rendered text; textContent would include hidden nodes.
    const raw = doc.body?.innerText ?? '';
    const text = raw
      .replace(/[ \t\f\v\u00a0]+/g, ' ')
      .replace(/\s*\n\s*/g, '\n')
      .trim();
    if (text) {
      parts.push(text);
      length += text.length + 1;
    }
    for (const frame of doc.querySelectorAll(FRAME_SELECTOR)) {
      const inner = sameOriginDocument(frame);
      if (inner && isVisible(frame)) add(inner);
    }
  };
  add(document);
  const joined = parts.join('\n');
  return joined.length <= limit
    ? { text: joined, truncated: false }
    : { text: joined.slice(0, limit), truncated: true };
}

function capture(request: CaptureRequest): Capture {
  const { visible, checked, limitReached } = collectVisible(request.candidateLimit);
  const offset = Math.min(request.offset, visible.length);
  const windowElements = visible.slice(offset, offset + request.windowSize);
  const refs = new Map<string, WeakRef<Element>>();
  const secrets = secretValues();
  const elements: CapturedElement[] = windowElements.map((element, index) => {
    const ref = `e${offset + index + 1}`;
    refs.set(ref, new WeakRef(element));
    const state = stateOf(element, request.nameLimit);
    if (state.value !== undefined) state.value = redact(state.value, secrets);
    const name = redact(computeAccessibleName(element, { getComputedStyle: styleOf }).trim(), secrets);
    return { ref, role: roleOf(element), name: clip(name, request.nameLimit), state };
  });
  // The new revision replaces the old one: its references are released here (ADR-0130 d8).
  registry = { revision: request.revision, refs };
  const { text, truncated } = visibleText(request.textLimit);
  return {
    url: redact(location.href, secrets),
    title: redact(document.title, secrets),
    text: redact(text, secrets),
    textTruncated: truncated,
    elements,
    offset,
    visibleSeen: visible.length,
    candidatesChecked: checked,
    candidateLimitReached: limitReached,
  };
}

function lookup(revision: string, ref: string): Element | 'page_changed' | 'element_not_found' {
  if (registry === null || registry.revision !== revision) return 'page_changed';
  const element = registry.refs.get(ref)?.deref();
  if (!element?.isConnected) return 'element_not_found';
  return element;
}

function isEditable(element: Element): boolean {
  if (isInput(element)) {
    return FILLABLE_INPUT_TYPES.has(element.type.toLowerCase()) && !element.readOnly;
  }
  if (element.localName === 'textarea') return !(element as HTMLTextAreaElement).readOnly;
  return (element as HTMLElement).isContentEditable === true;
}

function isCheckable(element: Element): boolean {
  if (isInput(element)) {
    const type = element.type.toLowerCase();
    return type === 'checkbox' || type === 'radio';
  }
  return ['checkbox', 'radio', 'switch', 'menuitemcheckbox', 'menuitemradio'].includes(roleOf(element));
}

/** The structural selector of `element` within its own document; null inside a shadow root. */
function structuralPath(element: Element): string | null {
  const steps: string[] = [];
  const root = element.ownerDocument.documentElement;
  let node = element;
  while (node !== root) {
    const parent = node.parentElement;
    if (!parent) return null;
    steps.push(`:nth-child(${Array.prototype.indexOf.call(parent.children, node) + 1})`);
    node = parent;
  }
  steps.push(':root');
  return steps.reverse().join(' > ');
}

function targetPath(element: Element): TargetPath | null {
  const selector = structuralPath(element);
  if (selector === null) return null;
  const frames: string[] = [];
  let doc = element.ownerDocument;
  while (doc !== document) {
    const frame = doc.defaultView?.frameElement;
    const framePath = frame ? structuralPath(frame) : null;
    if (!frame || framePath === null) return null;
    frames.unshift(framePath);
    doc = frame.ownerDocument;
  }
  return { frames, selector };
}

/**
 * The refusals of ADR-0130 d6 / DESIGN §6, decided before anything is dispatched, and where the
 * target is when the action may go ahead: one round trip, so the path is the checked element's.
 */
function check(revision: string, ref: string, action: string, text: string | null): TargetAnswer {
  const verdict = verdictOn(revision, ref, action, text);
  if (!verdict.startsWith('ok')) return { verdict, path: null };
  const element = lookup(revision, ref);
  const path = typeof element === 'string' ? null : targetPath(element);
  return path === null ? { verdict: 'element_not_found', path: null } : { verdict, path };
}

function verdictOn(revision: string, ref: string, action: string, text: string | null): TargetCheck {
  const element = lookup(revision, ref);
  if (typeof element === 'string') return element;
  if (isDisabled(element)) return 'action_not_allowed:the element is disabled';
  switch (action) {
    case 'fill':
      return isEditable(element) ? 'ok' : 'action_not_allowed:the element is not editable';
    case 'select': {
      if (element.localName !== 'select') return 'action_not_allowed:the element is not a list box';
      const options = [...(element as HTMLSelectElement).options];
      if (options.some((option) => option.label === text)) return 'ok:label';
      if (options.some((option) => option.value === text)) return 'ok:value';
      return 'action_not_allowed:the list box has no option with that label or value';
    }
    case 'check':
    case 'uncheck':
      return isCheckable(element) ? 'ok' : 'action_not_allowed:the element cannot be checked';
    default:
      return 'ok';
  }
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
    const watch = (doc: Document): void => {
      observer.observe(doc, { subtree: true, childList: true, attributes: true, characterData: true });
      for (const frame of doc.querySelectorAll(FRAME_SELECTOR)) {
        const inner = sameOriginDocument(frame);
        if (inner) watch(inner);
      }
    };
    // Same-origin frames are part of the observation, so their mutations count too.
    watch(document);
    const boundTimer = setTimeout(() => finish(false), Math.max(0, timeoutMs));
    restart();
  });
}

function readyState(): DocumentReadyState {
  return document.readyState;
}

const agent = { capture, check, invalidate, waitQuiet, readyState };
export type PageAgent = typeof agent;

// Defined in the isolated world's own global, which page code cannot reach (issue 11.12).
if (!Object.hasOwn(globalThis, PAGE_AGENT_GLOBAL)) {
  Object.defineProperty(globalThis, PAGE_AGENT_GLOBAL, {
    value: Object.freeze(agent),
    enumerable: false,
    writable: false,
    configurable: false,
  });
}
