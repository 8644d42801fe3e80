import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { PageEngine } from '../../libs/browser/index.js';
import type { ActArgsInput, BrowserObservation } from '../../libs/contracts/index.js';
import { EngineHarness, limits, ref } from './harness.js';

const harness = new EngineHarness();
beforeAll(() => harness.start());
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

const PASSWORD = 'correct-horse-9';
/** An uploaded file's id, as a run's input would list it. */
const FILE_ID = 'fil_0123456789abcdefghjk';

/** The page with one of every control, and a way to act on it by name. */
async function everyControl() {
  const { engine, page } = await harness.engine();
  let { observation } = await engine.navigate({ url: harness.url('/pages/every-control.html') }, limits());
  const act = async (name: string, args: Omit<ActArgsInput, 'revision' | 'element'>) => {
    observation = (
      await engine.act({ revision: observation.revision, element: ref(observation, name), ...args }, limits())
    ).observation;
    return observation;
  };
  const read = (expression: string) => page.evaluate(expression);
  return { engine, page, act, read, observation: () => observation };
}

function byName(observation: BrowserObservation, name: string) {
  const element = observation.elements.find((candidate) => candidate.name === name);
  if (!element) throw new Error(`no element named ${name}`);
  const { ref: _ref, name: _name, ...rest } = element;
  return rest;
}

/** In the frame, by Playwright's own getByRole; on the page otherwise (open shadow roots included). */
function locateByRole(page: Page, role: string, name: string) {
  const scope = ['Inside frame', 'Frame field'].includes(name) ? page.frameLocator('iframe') : page;
  return scope.getByRole(role as Parameters<Page['getByRole']>[0], { name, exact: true });
}

describe('every control has the role Playwright finds it by', () => {
  it('resolves each observed role and name to exactly that element with getByRole', async () => {
    const { page, observation } = await everyControl();
    const elements = observation().elements;
    expect(elements.map((element) => element.name)).toEqual(
      expect.arrayContaining(['Shadow action', 'Shadow field', 'Deep action', 'Inside frame', 'Bio']),
    );
    for (const element of elements) {
      // Playwright's getByRole gives a contenteditable region no role (its roleUtils has none for a
      // <div>), so it is found by its attribute here; the agent names it a textbox, as Chromium's
      // accessibility tree does, and Playwright's fill() acts on it.
      if (element.name === 'Bio') {
        expect(element.role).toBe('textbox');
        continue;
      }
      const located = locateByRole(page, element.role, element.name);
      expect({ name: element.name, count: await located.count() }).toEqual({ name: element.name, count: 1 });
    }
  });

  it('observes the roles, input types and states of every control, with a password never in it', async () => {
    const { act, observation } = await everyControl();
    await act('Password', { action: 'fill', text: PASSWORD });
    const seen = observation();
    expect(JSON.stringify(seen)).not.toContain(PASSWORD);
    const expected: Record<string, unknown> = {
      'Every control': { role: 'heading', state: {} },
      'Full name': { role: 'textbox', state: { value: 'Ada' } },
      Search: { role: 'searchbox', input_type: 'search', state: { value: 'cats' } },
      Email: { role: 'textbox', input_type: 'email', state: { value: 'ada@example.test' } },
      Website: { role: 'textbox', input_type: 'url', state: { value: 'https://example.test/' } },
      Phone: { role: 'textbox', input_type: 'tel', state: { value: '+33 1 23' } },
      Quantity: { role: 'spinbutton', input_type: 'number', state: { value: '3', min: 1, max: 9 } },
      Volume: { role: 'slider', input_type: 'range', state: { value: '4', min: 0, max: 10 } },
      Password: { role: 'textbox', input_type: 'password', state: { value_present: true } },
      Birthday: { role: 'textbox', input_type: 'date', state: { value: '2020-01-02' } },
      Alarm: { role: 'textbox', input_type: 'time', state: { value: '07:30' } },
      Meeting: { role: 'textbox', input_type: 'datetime-local', state: { value: '2026-12-03T10:15' } },
      'Billing month': { role: 'textbox', input_type: 'month', state: { value: '2026-11' } },
      'Sprint week': { role: 'textbox', input_type: 'week', state: { value: '2026-W49' } },
      'Theme colour': { role: 'textbox', input_type: 'color', state: { value: '#ff0000' } },
      Subscribe: { role: 'checkbox', state: { checked: false } },
      Small: { role: 'radio', state: { checked: true } },
      Large: { role: 'radio', state: { checked: false } },
      Attachment: { role: 'button', input_type: 'file', state: {} },
      Comments: { role: 'textbox', state: { value: 'Hello' } },
      Country: { role: 'combobox', state: { value: 'Japan' } },
      Toppings: { role: 'listbox', state: { values: ['Cheese', 'Olives'] } },
      Bio: { role: 'textbox', state: { value: 'Likes engines' } },
      Battery: { role: 'meter', state: { value: '0.6', min: 0, max: 1 } },
      Upload: { role: 'progressbar', state: { value: '30', min: 0, max: 100 } },
      Guests: { role: 'spinbutton', state: { value: '2', min: 0, max: 8 } },
      Submit: { role: 'button', state: {} },
      'Shadow action': { role: 'button', state: {} },
      'Shadow field': { role: 'textbox', state: { value: '' } },
      'Light action': { role: 'button', state: {} },
      'Deep action': { role: 'button', state: {} },
      'Inside frame': { role: 'button', state: {} },
      'Frame field': { role: 'textbox', state: { value: '' } },
    };
    for (const [name, element] of Object.entries(expected)) {
      expect({ name, ...byName(seen, name) }).toEqual({ name, ...(element as object) });
    }
  });

  it('observes the open shadow root of every kind of element that can host one', async () => {
    // The page scan leaves out elements that never host a shadow root: it must not leave
    // out one that can, whatever its tag.
    const tags = ['article', 'aside', 'blockquote', 'div', 'footer', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6'];
    tags.push('header', 'main', 'nav', 'p', 'section', 'span', 'x-host');
    harness.server.addPage(
      'every-host.html',
      `<!doctype html><title>Hosts</title>${tags.map((tag) => `<${tag}></${tag}>`).join('')}
      <script>
        for (const host of document.body.children) {
          if (host.localName === 'script') continue;
          host.attachShadow({ mode: 'open' }).innerHTML = '<button type="button">In ' + host.localName + '</button>';
        }
      </script>`,
    );
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate({ url: harness.url('/pages/every-host.html') }, limits());
    const buttons = observation.elements.filter(({ role }) => role === 'button');
    expect(buttons.map(({ name }) => name)).toEqual(tags.map((tag) => `In ${tag}`));
  });

  it('reads the text of open shadow roots, nested ones too', async () => {
    const { observation } = await everyControl();
    expect(observation().text).toContain('Shadow words');
    expect(observation().text).toContain('Deep action');
  });
});

describe('acting fits the control', () => {
  it('fills a password, a date, a time, a colour and a contenteditable region', async () => {
    const { act, read, observation } = await everyControl();
    await act('Password', { action: 'fill', text: PASSWORD });
    await act('Birthday', { action: 'fill', text: '2021-05-06' });
    await act('Alarm', { action: 'fill', text: '08:45' });
    await act('Theme colour', { action: 'fill', text: '#00ff00' });
    await act('Bio', { action: 'fill', text: 'Writes tests' });
    expect(
      await read(`['password', 'date', 'time', 'color'].map((id) => document.getElementById(id).value)`),
    ).toEqual([PASSWORD, '2021-05-06', '08:45', '#00ff00']);
    expect(await read(`document.getElementById('bio').textContent`)).toBe('Writes tests');
    expect(byName(observation(), 'Birthday').state).toEqual({ value: '2021-05-06' });
    expect(byName(observation(), 'Bio').state).toEqual({ value: 'Writes tests' });
    expect(JSON.stringify(observation())).not.toContain(PASSWORD);
  });

  it('sets a slider to a value by fill, as Playwright fills a range input', async () => {
    const { act, read } = await everyControl();
    const seen = await act('Volume', { action: 'fill', text: '7' });
    expect(await read(`document.getElementById('range').value`)).toBe('7');
    expect(byName(seen, 'Volume').state).toMatchObject({ value: '7', min: 0, max: 10 });
  });

  it('selects one option of a single select by its label', async () => {
    const { act, read } = await everyControl();
    const seen = await act('Country', { action: 'select', text: 'France' });
    expect(await read(`document.getElementById('country').value`)).toBe('France');
    expect(byName(seen, 'Country').state).toEqual({ value: 'France' });
  });

  it('selects exactly the given labels of a multiple select, refusing unknown labels first', async () => {
    const { act, read, engine } = await everyControl();
    const chosen = `[...document.getElementById('toppings').selectedOptions].map((o) => o.label)`;
    const seen = await act('Toppings', { action: 'select', labels: ['Ham', 'Basil'] });
    expect(await read(chosen)).toEqual(['Ham', 'Basil']);
    expect(byName(seen, 'Toppings').state).toEqual({ values: ['Ham', 'Basil'] });
    const refused = [
      { element: ref(seen, 'Toppings'), action: 'select' as const, labels: ['Ham', 'Pineapple'] },
      { element: ref(seen, 'Country'), action: 'select' as const, labels: ['France', 'Japan'] },
    ];
    for (const attempt of refused) {
      await expect(engine.act({ revision: seen.revision, ...attempt }, limits())).rejects.toMatchObject({
        code: 'action_not_allowed',
      });
    }
    expect(await read(chosen)).toEqual(['Ham', 'Basil']);
  });

  it('checks a checkbox and a radio', async () => {
    const { act, read } = await everyControl();
    await act('Subscribe', { action: 'check' });
    const seen = await act('Large', { action: 'check' });
    expect(
      await read(`[document.getElementById('subscribe').checked, document.getElementById('large').checked]`),
    ).toEqual([true, true]);
    expect(byName(seen, 'Small').state).toEqual({ checked: false });
  });

  it('refuses every action but upload on a file input before dispatching anything', async () => {
    const { engine, observation, read } = await everyControl();
    const seen = observation();
    for (const action of ['click', 'fill', 'press', 'check'] as const) {
      await expect(
        engine.act(
          { revision: seen.revision, element: ref(seen, 'Attachment'), action, text: 'a' },
          limits(),
        ),
      ).rejects.toMatchObject({
        code: 'action_not_allowed',
        message: expect.stringContaining('a file input takes the action upload'),
      });
    }
    expect(await read(`document.getElementById('file').files.length`)).toBe(0);
  });

  it('sets a file input to the run’s file with upload, byte for byte', async () => {
    const { engine, observation, read } = await everyControl();
    const seen = observation();
    const bytes = Buffer.from([37, 80, 68, 70, 0, 255, 10]);
    await engine.act(
      { revision: seen.revision, element: ref(seen, 'Attachment'), action: 'upload', file: FILE_ID },
      limits(),
      { id: FILE_ID, name: 'receipt.pdf', mimeType: 'application/pdf', buffer: bytes },
    );
    expect(
      await read(`(async () => {
        const file = document.getElementById('file').files[0];
        return [file.name, file.type, Array.from(new Uint8Array(await file.arrayBuffer()))];
      })()`),
    ).toEqual(['receipt.pdf', 'application/pdf', [...bytes]]);
  });

  it('refuses an upload to anything but a file input, or of a file it was not given, before dispatch', async () => {
    const { engine, observation, read } = await everyControl();
    const seen = observation();
    const payload = {
      id: FILE_ID,
      name: 'receipt.pdf',
      mimeType: 'application/pdf',
      buffer: Buffer.from('x'),
    };
    await expect(
      engine.act(
        { revision: seen.revision, element: ref(seen, 'Submit'), action: 'upload', file: FILE_ID },
        limits(),
        payload,
      ),
    ).rejects.toMatchObject({
      code: 'action_not_allowed',
      message: expect.stringContaining('not a file input'),
    });
    // The file named is not the one the caller gave (not the run's), or none was given.
    for (const given of [undefined, { ...payload, id: 'fil_someoneelse0000000' }]) {
      await expect(
        engine.act(
          { revision: seen.revision, element: ref(seen, 'Attachment'), action: 'upload', file: FILE_ID },
          limits(),
          given,
        ),
      ).rejects.toMatchObject({
        code: 'invalid_arguments',
        message: expect.stringContaining("not among the run's files"),
      });
    }
    await expect(
      engine.act({ revision: seen.revision, element: ref(seen, 'Attachment'), action: 'upload' }, limits()),
    ).rejects.toMatchObject({ code: 'invalid_arguments' });
    expect(await read(`document.getElementById('file').files.length`)).toBe(0);
  });
});

describe('open shadow roots', () => {
  it('clicks the shadow button, not the light button at the same index of its host', async () => {
    const { act, read } = await everyControl();
    await act('Shadow action', { action: 'click' });
    expect(await read(`document.getElementById('log').textContent`)).toBe('shadow clicked');
    await act('Light action', { action: 'click' });
    expect(await read(`document.getElementById('log').textContent`)).toBe('light clicked');
  });

  it('clicks a button two shadow roots deep and fills a field inside a shadow root', async () => {
    const { act, read } = await everyControl();
    await act('Deep action', { action: 'click' });
    expect(await read(`document.getElementById('log').textContent`)).toBe('deep clicked');
    const seen = await act('Shadow field', { action: 'fill', text: 'inside' });
    expect(
      await read(`document.getElementById('card').shadowRoot.getElementById('shadow-field').value`),
    ).toBe('inside');
    expect(byName(seen, 'Shadow field').state).toEqual({ value: 'inside' });
  });

  it('settles only when the mutations inside a shadow root stop', async () => {
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate(
      { url: harness.url('/pages/shadow-ticker.html') },
      limits(),
    );
    const acted = await engine.act(
      { revision: observation.revision, element: ref(observation, 'Start ticking'), action: 'click' },
      limits(),
    );
    expect(acted.observation.settle?.result).toBe('dom_quiet');
    expect(acted.observation.text).toContain('ticked 8');
  });

  it('acts in a same-origin frame as before', async () => {
    const { act, page } = await everyControl();
    await act('Inside frame', { action: 'click' });
    expect(await page.frames()[1]?.evaluate(`document.getElementById('state').textContent`)).toBe(
      'frame clicked',
    );
  });
});

describe('scroll', () => {
  async function farPage(): Promise<{ engine: PageEngine; page: Page; observation: BrowserObservation }> {
    const { engine, page } = await harness.engine();
    const { observation } = await engine.navigate({ url: harness.url('/pages/below-fold.html') }, limits());
    return { engine, page, observation };
  }

  it('reports the scroll position and size, and scrolls a target below the fold into view to act on it', async () => {
    const { engine, page, observation } = await farPage();
    const viewport = page.viewportSize();
    expect(observation.scroll).toMatchObject({
      x: 0,
      y: 0,
      viewport_width: viewport?.width,
      viewport_height: viewport?.height,
    });
    expect(observation.scroll?.height).toBeGreaterThan(5_000);
    // Visibility is about rendering, not the viewport: the button 5,000 px down is observed.
    const acted = await engine.act(
      { revision: observation.revision, element: ref(observation, 'Far button'), action: 'click' },
      limits(),
    );
    expect(await page.evaluate(`document.getElementById('log').textContent`)).toBe('far clicked');
    expect(acted.observation.scroll?.y).toBeGreaterThan(0);
  });
});
