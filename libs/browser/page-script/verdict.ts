/**
 * The page agent's verdict on an action's target (the action fits the control). Reads
 * the element only.
 */
import { inputType, isDisabled, isInput, roleOf } from './roles.js';

/** Why an element may not take an action, checked before anything is dispatched. */
export type TargetCheck =
  | 'ok'
  | 'ok:label'
  | 'ok:value'
  | 'ok:labels'
  | 'page_changed'
  | 'element_not_found'
  | `action_not_allowed:${string}`;

/**
 * Input types Playwright's fill() writes: text-like ones, date, time and colour in their ISO form,
 * and a range (a slider) set to a value.
 */
const FILLABLE_INPUT_TYPES = new Set([
  '',
  'text',
  'search',
  'email',
  'url',
  'tel',
  'number',
  'password',
  'date',
  'time',
  'datetime-local',
  'month',
  'week',
  'color',
  'range',
]);

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

/**
 * Whether `element` may take `action` (ADR-0130 d6 / DESIGN §6): decided in the page, before
 * anything is dispatched. `outline` is no action: any enabled element may be outlined.
 */
export function verdictFor(
  element: Element,
  action: string,
  text: string | null,
  labels: readonly string[] | null,
): TargetCheck {
  // A file input takes an uploaded file (`upload`) and nothing else: a click would open the
  // host's file chooser. `upload` takes nothing but a file input.
  const fileInput = inputType(element) === 'file';
  if (action === 'upload' && !fileInput) return 'action_not_allowed:the element is not a file input';
  if (action !== 'outline' && action !== 'upload' && fileInput) {
    return 'action_not_allowed:a file input takes the action upload';
  }
  if (isDisabled(element)) return 'action_not_allowed:the element is disabled';
  switch (action) {
    case 'fill':
      return isEditable(element) ? 'ok' : 'action_not_allowed:the element is not editable';
    case 'select': {
      if (element.localName !== 'select') return 'action_not_allowed:the element is not a list box';
      const select = element as HTMLSelectElement;
      const options = [...select.options];
      if (labels !== null) {
        if (!select.multiple && labels.length > 1) {
          return 'action_not_allowed:the list box takes one choice, not several labels';
        }
        const known = new Set(options.map((option) => option.label));
        return labels.every((label) => known.has(label))
          ? 'ok:labels'
          : 'action_not_allowed:the list box has no option with one of those labels';
      }
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
