/**
 * Nodes that can be controls or landmarks a model acts on or reads by name: the candidates whose
 * visibility an observation checks (ADR-0130 d8). In a file of their own, without side effects,
 * so the page bench checks the same nodes the page agent does.
 */
export const CANDIDATE_SELECTOR = [
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
  'meter',
  'progress',
].join(',');
