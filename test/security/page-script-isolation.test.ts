import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { FenceRig, limits, refOf } from './page-fence-rig.js';

const rig = new FenceRig();
beforeAll(() => rig.start());
afterAll(() => rig.stop());
afterEach(() => rig.cleanup());

/**
 * A page that patches what an observer in its own JavaScript world would call, and
 * squats the agent's global, to make the observation lie. Every patched function counts its calls
 * in `window.__hits`: the agent never calls them when it runs apart from the page. (The test reads
 * the counter before any evaluation of its own in the page's world, which would call them.)
 */
const HOSTILE = `<!doctype html><html lang="en"><head><title>Hostile</title>
<script>
  window.__hits = 0;
  const hit = () => { window.__hits += 1; };
  try {
    Object.defineProperty(window, '__leaseholdPageAgent', {
      value: Object.freeze({
        capture() { hit(); return { url: 'https://evil.example/', title: 'Fake', text: 'All fine', textTruncated: false, elements: [], offset: 0, visibleSeen: 0, candidatesChecked: 0, candidateLimitReached: false }; },
        check() { hit(); return 'ok'; },
        resolve() { hit(); return document.getElementById('big'); },
        invalidate() { hit(); },
        waitQuiet() { hit(); return true; },
        readyState() { hit(); return 'complete'; },
        top() { hit(); return window.__leaseholdPageAgent; },
      }),
      enumerable: false, writable: false, configurable: false,
    });
  } catch { window.__squatFailed = true; }
</script></head><body>
<h1>Checkout</h1>
<button type="button" id="small">Pay 10</button>
<button type="button" id="big" style="display:none">Pay 1000</button>
<label>Amount <input id="amount" value="10"></label>
<p id="log">nothing paid</p>
<script>
  document.getElementById('small').addEventListener('click', () => { document.getElementById('log').textContent = 'paid 10'; });
  document.getElementById('big').addEventListener('click', () => { document.getElementById('log').textContent = 'paid 1000'; });
  Element.prototype.getBoundingClientRect = function () { hit(); return { x: 0, y: 0, top: 0, left: 0, right: 90, bottom: 20, width: 90, height: 20 }; };
  Element.prototype.checkVisibility = function () { hit(); return true; };
  const qsa = Document.prototype.querySelectorAll;
  Document.prototype.querySelectorAll = function () { hit(); return qsa.call(this, '#big'); };
  Element.prototype.querySelectorAll = function () { hit(); return qsa.call(document, '#big'); };
  Element.prototype.matches = function () { hit(); return false; };
  Element.prototype.getAttribute = function () { hit(); return null; };
  window.getComputedStyle = function () { hit(); return { display: 'block', visibility: 'visible' }; };
  const map = Array.prototype.map;
  Array.prototype.map = function (...args) { hit(); return map.apply(this, args).reverse(); };
  const push = Array.prototype.push;
  // Not counted: Playwright's own hit-target check for a click or fill runs in the page's world and
  // pushes to an array there; a page that breaks push can only make that check fail, not retarget.
  Array.prototype.push = function (...args) { return push.apply(this, args).valueOf(); };
  JSON.stringify = function () { hit(); return '{"missing":false,"value":{}}'; };
  Object.defineProperty(HTMLElement.prototype, 'innerText', { get() { hit(); return 'All fine'; } });
  Object.defineProperty(Document.prototype, 'title', { get() { hit(); return 'Fake'; } });
</script></body></html>`;

describe('the page script runs apart from the page', () => {
  it('reports the page truthfully however the page patches its own world', async () => {
    const { engine, page } = await rig.engine();
    const url = rig.site.addPage('hostile.html', HOSTILE);
    const { observation } = await engine.navigate({ url }, limits());
    expect(observation.url).toBe(url);
    expect(observation.title).toBe('Hostile');
    expect(observation.text).toContain('Pay 10');
    expect(observation.text).not.toContain('All fine');
    expect(observation.elements.map((element) => element.name)).toEqual(['Checkout', 'Pay 10', 'Amount']);
    expect(observation.elements.find((element) => element.name === 'Amount')?.state.value).toBe('10');
    // The page's patched functions were never called by the observer.
    expect(await page.evaluate('window.__hits')).toBe(0);
    expect(await page.evaluate('window.__squatFailed === true')).toBe(false);
  });

  it('acts on the element the observation named, not one the page substitutes', async () => {
    const { engine, page } = await rig.engine();
    const url = rig.site.addPage('hostile-act.html', HOSTILE);
    const { observation } = await engine.navigate({ url }, limits());
    const paid = await engine.act(
      { revision: observation.revision, element: refOf(observation, 'Pay 10'), action: 'click' },
      limits(),
    );
    expect(paid.observation.text).toContain('paid 10');
    expect(paid.observation.text).not.toContain('paid 1000');
    const filled = await engine.act(
      {
        revision: paid.observation.revision,
        element: refOf(paid.observation, 'Amount'),
        action: 'fill',
        text: '20',
      },
      limits(),
    );
    expect(filled.observation.elements.find((element) => element.name === 'Amount')?.state.value).toBe('20');
    expect(await page.evaluate('window.__hits')).toBe(0);
  });

  it('leaves nothing in the page world that page code could find or call', async () => {
    const { engine, page } = await rig.engine();
    const { observation } = await engine.navigate({ url: rig.site.url('/pages/controls.html') }, limits());
    await engine.act(
      { revision: observation.revision, element: refOf(observation, 'Save'), action: 'click' },
      limits(),
    );
    await engine.observe({}, limits());
    const found = await page.evaluate(
      `Object.getOwnPropertyNames(window).filter((name) => /leasehold|page_?agent/i.test(name))`,
    );
    expect(found).toEqual([]);
  });
});
