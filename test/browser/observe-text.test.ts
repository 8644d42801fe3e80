import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PageEngine } from '../../libs/browser/index.js';
import { TEXT_LIMIT_CHARS } from '../../libs/browser/observation.js';
import { normalizeText } from '../../libs/browser/page-script/document-text.js';
import { EngineHarness, limits } from './harness.js';

/**
 * The page's text is read block by block, only as far as the observation keeps it, and
 * must read exactly as `body.innerText` normalized and cut to the bound. Each page puts one way of
 * laying out text first in a container long enough to be read by its blocks, so the reading meets
 * it there; the agent's own normalization is applied to the page's innerText here.
 */
const harness = new EngineHarness();

/** Blocks of text enough to pass the bound several times over. */
const FILLER = Array.from(
  { length: 60 },
  (_, i) =>
    `<div><p>Filler ${i} with <b>bold</b> words</p><p>and a second paragraph, ${'long '.repeat(12)}</p></div>`,
).join('\n');

const CASES: Record<string, string> = {
  'inline siblings': '<span>ab</span><span>cd</span> <em>ef</em>',
  'text beside blocks': 'Loose text<div>Block</div>more loose text',
  'hidden blocks showing their children':
    '<div style="visibility:hidden"><span style="visibility:visible">X</span></div>' +
    '<div style="visibility:hidden"><span style="visibility:visible">Y</span></div>',
  floats: '<div style="float:left">Float A</div><div style="float:left">Float B</div><div>After</div>',
  'positioned blocks': '<div style="position:absolute;top:0">Abs</div><div>In flow</div>',
  'display contents': '<div style="display:contents"><span>C1</span><span>C2</span></div><div>Next</div>',
  'generated content': '<div class="generated"><div>Inside generated</div><div>Second</div></div>',
  'list items': '<ol><li>One</li><li>Two <span>inline</span></li></ol><ul><li>Dot</li></ul>',
  'table rows': '<table><tr><td>A1</td><td>A2</td></tr><tr><td>B1</td><td>B2</td></tr></table>',
  'line breaks': '<div>Before<br>after</div><br><div>Next block</div>',
  'preformatted text': '<pre>  keep   these\n\n  runs  </pre><div>Then</div>',
  'content-visibility hidden': '<div style="content-visibility:hidden">Skipped text</div><div>Shown</div>',
  'display none children': '<div style="display:none">Gone</div><script>void 0</script><div>Kept</div>',
  'inline blocks': '<div style="display:inline-block">IB1</div><div style="display:inline-block">IB2</div>',
  'flex container': '<div style="display:flex"><div>F1</div><div>F2</div></div><div>Below</div>',
  'closed details': '<details><summary>Sum</summary><div>Hidden detail</div></details><div>Next</div>',
  'transformed text': '<div style="text-transform:uppercase">straße and more</div><div>Next</div>',
  'non-breaking spaces': '<div>\u00a0\u00a0</div><div>a\u00a0\u00a0b</div><div>\u3000wide</div>',
  'shadow host': '<div id="host"><span>Light child</span></div><div>After host</div>',
};

function casePage(content: string, nested: boolean): string {
  const body = `<div class="case">${content}\n${FILLER}</div>`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Text</title>
<style>.generated::before{content:"Before "}.generated::after{content:" after"}</style></head><body>
${nested ? `<main><section>${body}</section></main>` : body}
<script>
  const host = document.getElementById('host');
  if (host) host.attachShadow({ mode: 'open' }).innerHTML = '<p>Shadow text</p><slot></slot>';
</script></body></html>`;
}

/**
 * One page and engine for every case: each case loads its page and observes it. The pages are
 * static (their one script runs while the page parses), so the load is the whole of their making,
 * and the engine's settle after a navigate (most of a case's time) has nothing to wait for.
 */
let engine: PageEngine;
let page: Page;

beforeAll(async () => {
  await harness.start();
  for (const [index, content] of Object.values(CASES).entries()) {
    harness.server.addPage(`text-${index}.html`, casePage(content, false));
    harness.server.addPage(`text-nested-${index}.html`, casePage(content, true));
  }
  ({ engine, page } = await harness.engine());
});
afterAll(() => harness.stop());

describe('the observed text reads as the page body innerText', () => {
  it.each(
    Object.keys(CASES).flatMap((name, index) => [
      [name, `text-${index}.html`],
      [`${name}, nested two blocks deep`, `text-nested-${index}.html`],
    ]),
  )('reads %s as innerText does', async (_name, path) => {
    await page.goto(harness.url(`/pages/${path}`));
    const { observation } = await engine.observe({}, limits());
    // biome-ignore lint/performance/useDomNodeTextContent: the rendered text is what is compared.
    const whole = normalizeText(await page.evaluate(() => document.body.innerText));
    expect(observation.text).toBe(whole.slice(0, TEXT_LIMIT_CHARS));
    expect(observation.text_truncated).toBe(whole.length > TEXT_LIMIT_CHARS);
  });
});
