import type { RunView } from '../contracts/index.js';
import { type Html, html } from './html.js';

type Scalar = string | number | boolean | null;

function isScalar(value: unknown): value is Scalar {
  return value === null || ['string', 'number', 'boolean'].includes(typeof value);
}

/**
 * A run's validated output (`result.output`, where it had an output schema): a flat object as a
 * table of its fields, anything else as its indented JSON. Every value is escaped by `html`.
 */
export function outputSection(run: RunView): Html | '' {
  const result = run.result;
  if (!result || !('output' in result)) return '';
  const output = result.output;
  const flat =
    typeof output === 'object' &&
    output !== null &&
    !Array.isArray(output) &&
    Object.values(output).every(isScalar);
  return html`<section id="output"><h2>Output</h2>${
    flat
      ? html`<table class="output"><tbody>${Object.entries(output as Record<string, Scalar>).map(
          ([key, value]) => html`<tr><th scope="row">${key}</th><td>${String(value)}</td></tr>`,
        )}</tbody></table>`
      : html`<pre class="output">${JSON.stringify(output, null, 2)}</pre>`
  }</section>`;
}
