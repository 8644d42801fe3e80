import { createHash } from 'node:crypto';
import type { BrowserObservation } from '../contracts/index.js';

/**
 * ADR-0130 d7: the platform's evidence key for a returned page — a hash of its url, title, text
 * and each element's role, name and state. The revision and the references are left out: they are
 * random on every observation, and a page that did not change must give the same key.
 */
export function evidenceKey(
  observation: Pick<BrowserObservation, 'url' | 'title' | 'text' | 'elements'>,
): string {
  const canonical = JSON.stringify([
    observation.url,
    observation.title,
    observation.text,
    observation.elements.map((element) => [
      element.role,
      element.name,
      element.state.disabled ?? false,
      element.state.checked ?? null,
      element.state.expanded ?? null,
      element.state.selected ?? null,
      element.state.value ?? null,
    ]),
  ]);
  return createHash('sha256').update(canonical).digest('hex');
}
