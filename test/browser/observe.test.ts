import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { BrowserToolError } from '../../libs/browser/index.js';
import { EngineHarness, limits } from './harness.js';

const harness = new EngineHarness();
beforeAll(() => harness.start());
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

describe('observation (DESIGN §6, ADR-0130 d8)', () => {
  it('observes the 5 visible controls behind 300 hidden ones, and the hidden ones take no slot', async () => {
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate(
      { url: harness.url('/pages/hidden-controls.html') },
      limits(),
    );
    expect(observation.elements.map(({ role, name }) => [role, name])).toEqual([
      ['button', 'Visible one'],
      ['link', 'Visible two'],
      ['textbox', 'Visible three'],
      ['checkbox', 'Visible four'],
      ['combobox', 'Visible five'],
    ]);
    expect(observation.elements.map((element) => element.state)).toEqual([
      {},
      {},
      { value: 'typed' },
      { checked: true },
      { value: 'Second' },
    ]);
    expect(observation.window).toMatchObject({
      offset: 0,
      count: 5,
      visible_seen: 5,
      candidates_checked: 305,
      candidate_limit_reached: false,
      continuation: null,
    });
    expect(observation.text).not.toContain('Hidden');
  });

  it('never writes to the page while observing', async () => {
    const { engine, page } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    await page.evaluate(`(() => {
      window.__mutations = 0;
      new MutationObserver((records) => { window.__mutations += records.length; })
        .observe(document, { subtree: true, childList: true, attributes: true, characterData: true });
    })()`);
    await engine.observe({}, limits());
    await engine.observe({}, limits());
    // Nothing but time can show an absence: a write by either observe would be reported to the
    // observer within a task or two; 50 ms in the page leaves room for that, and none may come.
    await page.evaluate('new Promise((resolve) => setTimeout(resolve, 50))');
    expect(await page.evaluate('window.__mutations')).toBe(0);
    expect(await page.evaluate('document.querySelectorAll("[data-ref],[data-leasehold-ref]").length')).toBe(
      0,
    );
  });

  it('pages through visible elements past the first window with continuation', async () => {
    const { engine } = await harness.engine();
    const first = await engine.navigate({ url: harness.url('/pages/many-visible.html') }, limits());
    expect(first.observation.elements).toHaveLength(256);
    expect(first.observation.elements.at(-1)?.name).toBe('Item 256');
    expect(first.observation.window).toMatchObject({ offset: 0, count: 256, visible_seen: 600 });
    const token = first.observation.window.continuation;
    expect(token).not.toBeNull();

    const second = await engine.observe({ continuation: token ?? '' }, limits());
    expect(second.observation.window).toMatchObject({ offset: 256, count: 256 });
    expect(second.observation.elements[0]).toMatchObject({ ref: 'e257', name: 'Item 257' });
    expect(second.observation.settle).toBeNull();

    const third = await engine.observe(
      { continuation: second.observation.window.continuation ?? '' },
      limits(),
    );
    expect(third.observation.elements.map((element) => element.name)).toEqual(
      Array.from({ length: 88 }, (_, i) => `Item ${513 + i}`),
    );
    expect(third.observation.window.continuation).toBeNull();

    // A continuation of a replaced revision is refused.
    await expect(engine.observe({ continuation: token ?? '' }, limits())).rejects.toMatchObject({
      code: 'page_changed',
    });
  });

  it('includes a same-origin iframe in document order and acts inside it', async () => {
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url: harness.url('/pages/with-frame.html') }, limits());
    expect(observation.elements.map((element) => element.name)).toEqual([
      'Outside frame',
      'Inside frame',
      'Frame field',
      'After frame',
    ]);
    expect(observation.text).toContain('frame idle');
    const inside = observation.elements.find((element) => element.name === 'Inside frame');
    const clicked = await engine.act(
      { revision: observation.revision, element: inside?.ref ?? '', action: 'click' },
      limits(),
    );
    expect(clicked.observation.text).toContain('frame clicked');
    const field = clicked.observation.elements.find((element) => element.name === 'Frame field');
    const filled = await engine.act(
      { revision: clicked.observation.revision, element: field?.ref ?? '', action: 'fill', text: 'hello' },
      limits(),
    );
    expect(filled.observation.elements.find((element) => element.name === 'Frame field')?.state.value).toBe(
      'hello',
    );
  });

  it('gives an unchanged page the same evidence key under a new revision, and a changed page another', async () => {
    const { engine, page } = await harness.engine();
    const first = await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    const again = await engine.observe({}, limits());
    expect(again.observation.revision).not.toBe(first.observation.revision);
    expect(again.evidenceKey).toBe(first.evidenceKey);
    expect(JSON.stringify(again.observation)).not.toContain(again.evidenceKey);
    await page.evaluate(`document.getElementById('log').textContent = 'changed'`);
    const changed = await engine.observe({}, limits());
    expect(changed.evidenceKey).not.toBe(first.evidenceKey);
  });

  it('fails a capture cut off by the deadline with page_changed and voids earlier references', async () => {
    const { engine, page } = await harness.engine();
    const first = await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    // The page's main thread is busy for 1.5 s: the capture cannot complete within its 300 ms.
    await page.evaluate('setTimeout(() => { const end = Date.now() + 1500; while (Date.now() < end); }, 0)');
    const cutOff = await engine.observe({}, limits(300)).catch((error: unknown) => error);
    expect(cutOff).toBeInstanceOf(BrowserToolError);
    expect(cutOff).toMatchObject({ code: 'page_changed' });
    const save = first.observation.elements.find((element) => element.name === 'Save');
    await expect(
      engine.act(
        { revision: first.observation.revision, element: save?.ref ?? '', action: 'click' },
        limits(),
      ),
    ).rejects.toMatchObject({ code: 'page_changed' });
    expect(await page.evaluate(`document.getElementById('log').textContent`)).toBe('nothing yet');
  });

  it('gives back nothing and sends nothing when the signal is already aborted', async () => {
    const { engine } = await harness.engine();
    await engine.navigate({ url: harness.url('/pages/controls.html') }, limits());
    const controller = new AbortController();
    controller.abort();
    await expect(engine.observe({}, limits(5_000, controller.signal))).rejects.toMatchObject({
      code: 'provider_unavailable',
    });
    await expect(
      engine.navigate({ url: harness.url('/pages/link.html') }, limits(5_000, controller.signal)),
    ).rejects.toMatchObject({ code: 'provider_unavailable' });
    expect(harness.server.log.some((entry) => entry.path === '/pages/link.html')).toBe(false);
  });
});
