import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PageServer } from '../fixtures/page-server.js';
import { EngineHarness, limits, ref } from './harness.js';

// The parent is served on 127.0.0.1 and the child by another server on `localhost`, so
// the two are of different sites and Chromium gives the child a target (OOPIF) of its own.
const harness = new EngineHarness();
let child: PageServer;

beforeAll(async () => {
  await harness.start();
  child = await PageServer.start();
  child.addPage(
    'xo-child.html',
    `<!doctype html><title>Child</title><p>Inside the child frame</p>
     <input aria-label="Coupon">
     <button type="button" onclick="fetch('/api/slow?label=' + encodeURIComponent(document.querySelector('input').value))">Apply</button>`,
  );
  harness.server.addPage(
    'xo-parent.html',
    `<!doctype html><title>Parent</title>
     <button type="button">Before</button>
     <iframe src="${child.otherOrigin}/pages/xo-child.html" style="width:400px;height:200px"></iframe>
     <button type="button">After</button>
     <iframe src="${harness.server.otherOrigin}/pages/xo-child.html" style="width:400px;height:200px"></iframe>`,
  );
  harness.server.addPage(
    'xo-child.html',
    `<!doctype html><title>Blocked child</title><button type="button">Not to be seen</button>`,
  );
});
afterAll(async () => {
  await harness.stop();
  await child?.close();
});
afterEach(() => harness.cleanup());

describe('frames of other allowed origins', () => {
  it('observes a cross-origin child frame in document order and acts on it through its own target', async () => {
    const { engine, page } = await harness.engine({ frameOrigins: [child.otherOrigin] });
    const observed = (await engine.navigate({ url: harness.url('/pages/xo-parent.html') }, limits()))
      .observation;
    // Both frames loaded (the disallowed one blocked) before the observation is trusted.
    expect(page.frames().length).toBeGreaterThanOrEqual(2);
    const names = observed.elements.map((element) => element.name);
    expect(names).toEqual(['Before', 'Coupon', 'Apply', 'After']);
    expect(new Set(observed.elements.map((element) => element.ref)).size).toBe(4);
    expect(observed.window.visible_seen).toBe(4);
    expect(observed.text).toContain('Inside the child frame');
    expect(observed.text).not.toContain('Not to be seen');

    const filled = await engine.act(
      { revision: observed.revision, element: ref(observed, 'Coupon'), action: 'fill', text: 'SPRING' },
      limits(),
    );
    const after = filled.observation;
    expect(after.elements.find((element) => element.name === 'Coupon')?.state.value).toBe('SPRING');
    const applied = (
      await engine.act({ revision: after.revision, element: ref(after, 'Apply'), action: 'click' }, limits())
    ).observation;
    const childHost = new URL(child.otherOrigin).host;
    expect(child.hitsOn(childHost).map((entry) => entry.path)).toContain('/api/slow?label=SPRING');
    // The parent's own elements still act through the main world.
    await engine.act(
      { revision: applied.revision, element: ref(applied, 'After'), action: 'click' },
      limits(),
    );
  });

  it('leaves a cross-origin child frame the profile does not allow unobserved', async () => {
    const { engine } = await harness.engine();
    const observed = (await engine.navigate({ url: harness.url('/pages/xo-parent.html') }, limits()))
      .observation;
    expect(observed.elements.map((element) => element.name)).toEqual(['Before', 'After']);
    expect(observed.text).not.toContain('Inside the child frame');
    expect(observed.text).not.toContain('Not to be seen');
  });

  it('keeps references unique and the window exact when a frame sits past the first window', async () => {
    const many = Array.from({ length: 300 }, (_, i) => `<button type="button">P${i}</button>`).join('');
    harness.server.addPage(
      'xo-long.html',
      `<!doctype html><title>Long</title>${many}
       <iframe src="${child.otherOrigin}/pages/xo-child.html" style="width:400px;height:200px"></iframe>
       <button type="button">Last</button>`,
    );
    const { engine } = await harness.engine({ frameOrigins: [child.otherOrigin] });
    const first = (await engine.navigate({ url: harness.url('/pages/xo-long.html') }, limits())).observation;
    expect(first.elements).toHaveLength(256);
    expect(first.window.visible_seen).toBe(303);
    const token = first.window.continuation;
    expect(token).not.toBeNull();
    const rest = (await engine.observe({ continuation: token ?? undefined }, limits())).observation;
    expect(rest.elements.map((element) => element.name).slice(-4)).toEqual([
      'P299',
      'Coupon',
      'Apply',
      'Last',
    ]);
    expect(rest.elements.map((element) => element.ref).slice(-1)).toEqual(['e303']);
    const filled = await engine.act(
      { revision: rest.revision, element: ref(rest, 'Coupon'), action: 'fill', text: 'LATE' },
      limits(),
    );
    expect(filled.observation.text).toContain('Inside the child frame');
  });
});
