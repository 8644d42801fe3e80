/**
 * Roles, input types and states of the page agent's elements, in the vocabulary of
 * Playwright's `getByRole`: a role the agent reports is one a model's predicate, and Playwright,
 * find the element by. Read-only, like the rest of the agent.
 */
import { getRole } from 'dom-accessibility-api';

export interface ElementState {
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
}

/** By tag name, not instanceof: elements of a same-origin frame come from another realm. */
export function isInput(element: Element): element is HTMLInputElement {
  return element.localName === 'input';
}

/** Playwright's roleUtils for `<input>`: the types it gives a role of their own. */
const INPUT_TYPE_ROLES: Record<string, string> = {
  button: 'button',
  checkbox: 'checkbox',
  image: 'button',
  number: 'spinbutton',
  radio: 'radio',
  range: 'slider',
  reset: 'button',
  submit: 'button',
  file: 'button',
};
const PLAIN_TEXT_TYPES = new Set(['', 'text', 'search', 'email', 'url', 'tel']);

/** Input types reported on the element, where the role alone does not say what to type. */
const REPORTED_INPUT_TYPES = new Set([
  'password',
  'date',
  'time',
  'datetime-local',
  'month',
  'week',
  'color',
  'email',
  'url',
  'tel',
  'search',
  'number',
  'range',
  'file',
]);

/** Input types that hold a value a model reads as text (a date in its ISO form). */
const NON_TEXT_TYPES = new Set([
  'checkbox',
  'radio',
  'file',
  'range',
  'number',
  'button',
  'image',
  'reset',
  'submit',
]);

export function inputType(element: Element): string | undefined {
  if (!isInput(element)) return undefined;
  const type = element.type.toLowerCase();
  return REPORTED_INPUT_TYPES.has(type) ? type : undefined;
}

function inputRole(input: HTMLInputElement): string {
  const type = input.type.toLowerCase();
  if (PLAIN_TEXT_TYPES.has(type)) {
    const listId = input.getAttribute('list');
    const list = listId ? input.ownerDocument.getElementById(listId) : null;
    if (list?.localName === 'datalist') return 'combobox';
    return type === 'search' ? 'searchbox' : 'textbox';
  }
  if (type === 'hidden') return 'none';
  // Password, date, time, datetime-local, month, week, color and any unknown type: a textbox.
  return INPUT_TYPE_ROLES[type] ?? 'textbox';
}

/** The root of an editable region: editable itself, its parent not. */
export function isEditableRoot(element: Element): boolean {
  const html = element as HTMLElement;
  if (html.isContentEditable !== true) return false;
  const parent = element.parentElement;
  return !(parent as HTMLElement | null)?.isContentEditable;
}

/** Explicit `role=` first (dom-accessibility-api reads it), then Playwright's rule for inputs. */
export function roleOf(element: Element): string {
  if (!element.hasAttribute('role')) {
    if (isInput(element)) return inputRole(element);
    if (isEditableRoot(element) && element.localName !== 'textarea') return 'textbox';
    // dom-accessibility-api gives <meter> no role; Playwright's roleUtils does.
    if (element.localName === 'meter') return 'meter';
  }
  return getRole(element) ?? 'generic';
}

/** `autocomplete` tokens that mark a text field as holding a secret. */
const SECRET_AUTOCOMPLETE = /\b(current-password|new-password|one-time-code)\b/i;

/**
 * A password field — or a field the page marks as one for a password or one-time
 * code — holds a secret whose value never leaves the browser.
 */
export function isSecretField(element: Element): element is HTMLInputElement {
  if (!isInput(element)) return false;
  return element.type.toLowerCase() === 'password' || SECRET_AUTOCOMPLETE.test(element.autocomplete);
}

export function isDisabled(element: Element): boolean {
  if (element.matches(':disabled')) return true;
  return element.closest('[aria-disabled="true"]') !== null;
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

function finite(text: string | null): number | undefined {
  if (text === null || text.trim() === '') return undefined;
  const value = Number(text);
  return Number.isFinite(value) ? value : undefined;
}

/** A range's value and bounds: `value` as text, `min`/`max` where known. */
function rangeState(
  state: ElementState,
  value: string,
  min: number | undefined,
  max: number | undefined,
): void {
  state.value = value;
  if (min !== undefined) state.min = min;
  if (max !== undefined) state.max = max;
}

function inputState(state: ElementState, input: HTMLInputElement, valueLimit: number): void {
  const type = input.type.toLowerCase();
  if (type === 'checkbox' || type === 'radio') {
    state.checked = input.indeterminate ? 'mixed' : input.checked;
  } else if (type === 'range') {
    // A range without bounds spans 0–100 (HTML's default).
    rangeState(
      state,
      input.value,
      finite(input.getAttribute('min')) ?? 0,
      finite(input.getAttribute('max')) ?? 100,
    );
  } else if (type === 'number') {
    rangeState(state, input.value, finite(input.getAttribute('min')), finite(input.getAttribute('max')));
  } else if (!NON_TEXT_TYPES.has(type)) {
    state.value = clip(input.value, valueLimit);
  }
}

/** Text and list values; ranges and aria-valuenow; checked, expanded and selected. */
export function stateOf(element: Element, valueLimit: number): ElementState {
  const state: ElementState = {};
  if (isDisabled(element)) state.disabled = true;
  const name = element.localName;
  if (isSecretField(element)) {
    state.value_present = element.value.length > 0;
  } else if (isInput(element)) {
    inputState(state, element, valueLimit);
  } else if (name === 'textarea') {
    state.value = clip((element as HTMLTextAreaElement).value, valueLimit);
  } else if (name === 'select') {
    const select = element as HTMLSelectElement;
    const chosen = [...select.selectedOptions].map((option) => clip(option.label, valueLimit));
    if (select.multiple) state.values = chosen;
    else state.value = chosen[0] ?? '';
  } else if (name === 'meter' || name === 'progress') {
    const range = element as HTMLMeterElement | HTMLProgressElement;
    const min = name === 'meter' ? (range as HTMLMeterElement).min : 0;
    // An indeterminate progress bar (no value) has no current value to report.
    if (name === 'meter' || element.hasAttribute('value'))
      rangeState(state, String(range.value), min, range.max);
  } else if (element.hasAttribute('aria-valuenow')) {
    rangeState(
      state,
      element.getAttribute('aria-valuenow') ?? '',
      finite(element.getAttribute('aria-valuemin')),
      finite(element.getAttribute('aria-valuemax')),
    );
  } else if (isEditableRoot(element)) {
    // biome-ignore lint/performance/useDomNodeTextContent: innerText is the text as rendered.
    state.value = clip((element as HTMLElement).innerText.replace(/\s+/g, ' ').trim(), valueLimit);
  } else if (name === 'option') {
    state.selected = (element as HTMLOptionElement).selected;
  }
  if (!isInput(element)) {
    const checked = element.getAttribute('aria-checked');
    if (checked === 'true' || checked === 'false') state.checked = checked === 'true';
    else if (checked === 'mixed') state.checked = 'mixed';
  }
  const expanded = ariaBoolean(element, 'aria-expanded');
  if (expanded !== undefined) state.expanded = expanded;
  else if (name === 'details') state.expanded = (element as HTMLDetailsElement).open;
  else if (name === 'summary' && element.parentElement?.localName === 'details') {
    state.expanded = (element.parentElement as HTMLDetailsElement).open;
  }
  const selected = ariaBoolean(element, 'aria-selected');
  if (selected !== undefined) state.selected = selected;
  return state;
}
