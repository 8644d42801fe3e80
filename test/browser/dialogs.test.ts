import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DIALOG_MESSAGE_LIMIT_CHARS } from '../../libs/browser/dialogs.js';
import type { PageEngine } from '../../libs/browser/index.js';
import { type BrowserObservation, DIALOG_REF } from '../../libs/contracts/index.js';
import { click, EngineHarness, limits, ref } from './harness.js';

const harness = new EngineHarness();
beforeAll(async () => {
  await harness.start();
  harness.server.addPage(
    'dialog-buttons.html',
    `<!doctype html><title>Dialogs</title><p id="log">nothing yet</p>
     <script>const say = (text) => { document.getElementById('log').textContent = text; };</script>
     <button type="button" onclick="alert('Saved, mind the gap'); say('after the alert')">Alert</button>
     <button type="button" onclick="say(confirm('Delete everything?') ? 'deleted' : 'kept')">Confirm</button>
     <button type="button" onclick="say('hello ' + prompt('Your name?', 'nobody'))">Prompt</button>`,
  );
  harness.server.addPage(
    'dialog-secret.html',
    `<!doctype html><title>Sign in</title>
     <label>Password <input type="password" id="pw"></label>
     <button type="button" onclick="alert('You typed ' + document.getElementById('pw').value + ' ' + 'x'.repeat(400))">Reveal</button>`,
  );
  harness.server.addPage(
    'dialog-leaving.html',
    `<!doctype html><title>Unsaved</title><p id="log">draft</p>
     <script>addEventListener('beforeunload', (event) => { event.preventDefault(); event.returnValue = ''; });</script>
     <button type="button" onclick="document.getElementById('log').textContent = 'edited'">Edit</button>`,
  );
  harness.server.addPage(
    'dialog-on-load.html',
    `<!doctype html><html><head><title>Welcome</title></head><body><p>Before</p>
     <script>alert('Welcome aboard')</script><p>After the welcome</p></body></html>`,
  );
});
afterAll(() => harness.stop());
afterEach(() => harness.cleanup());

async function buttonsPage() {
  const { engine, page } = await harness.engine();
  const { observation } = await engine.navigate({ url: harness.url('/pages/dialog-buttons.html') }, limits());
  return { engine, page, observation };
}

function answer(
  engine: PageEngine,
  observation: BrowserObservation,
  action: 'accept' | 'dismiss',
  text?: string,
  beforeDispatch?: () => Promise<void>,
) {
  return engine.act(
    { revision: observation.revision, element: DIALOG_REF, action, ...(text === undefined ? {} : { text }) },
    { ...limits(), ...(beforeDispatch ? { beforeDispatch } : {}) },
  );
}

describe('dialogs', () => {
  it('answers a click that opens an alert with the alert shown, and accept lets the page go on', async () => {
    const { engine, observation } = await buttonsPage();
    const held = await click(engine, observation, 'Alert');
    expect(held.dialog).toEqual({ type: 'alert', message: 'Saved, mind the gap' });
    expect(held.title).toBe('Dialogs');
    expect(held.url).toBe(harness.url('/pages/dialog-buttons.html'));
    expect(held.elements).toEqual([]);

    // An element cannot be acted on while the dialog holds the page; nothing is dispatched.
    let watermarks = 0;
    const count = async () => {
      watermarks += 1;
    };
    await expect(
      engine.act(
        { revision: held.revision, element: ref(observation, 'Confirm'), action: 'click' },
        { ...limits(), beforeDispatch: count },
      ),
    ).rejects.toMatchObject({ code: 'action_not_allowed' });
    // An explicit observe shows the same dialog under a new revision.
    const again = (await engine.observe({}, limits())).observation;
    expect(again.dialog).toEqual(held.dialog);
    await expect(answer(engine, held, 'accept')).rejects.toMatchObject({ code: 'page_changed' });

    const accepted = await answer(engine, again, 'accept', undefined, count);
    expect(watermarks).toBe(1);
    expect(accepted.observation.dialog).toBeUndefined();
    expect(accepted.observation.text).toContain('after the alert');
    expect(accepted.observation.settle?.result).toBe('dom_quiet');
  });

  it('refuses accept or dismiss with no dialog open before its effect watermark', async () => {
    const { engine, observation } = await buttonsPage();
    let watermarks = 0;
    for (const action of ['accept', 'dismiss'] as const) {
      await expect(
        answer(engine, observation, action, undefined, async () => {
          watermarks += 1;
        }),
      ).rejects.toMatchObject({ code: 'action_not_allowed' });
    }
    expect(watermarks).toBe(0);
  });

  it('gives a confirm true on accept and false on dismiss', async () => {
    const { engine, observation } = await buttonsPage();
    const asked = await click(engine, observation, 'Confirm');
    expect(asked.dialog).toEqual({ type: 'confirm', message: 'Delete everything?' });
    const accepted = (await answer(engine, asked, 'accept')).observation;
    expect(accepted.text).toContain('deleted');

    const askedAgain = await click(engine, accepted, 'Confirm');
    const dismissed = (await answer(engine, askedAgain, 'dismiss')).observation;
    expect(dismissed.text).toContain('kept');
    expect(dismissed.text).not.toContain('deleted');
  });

  it('gives a prompt the text accepted with it, and shows its default value', async () => {
    const { engine, observation } = await buttonsPage();
    const asked = await click(engine, observation, 'Prompt');
    expect(asked.dialog).toEqual({ type: 'prompt', message: 'Your name?', default_value: 'nobody' });
    const accepted = (await answer(engine, asked, 'accept', 'Ada')).observation;
    expect(accepted.text).toContain('hello Ada');
  });

  it("shows an alert a page opens while loading on the navigation's observation", async () => {
    const { engine } = await harness.engine();
    const { observation } = await engine.navigate(
      { url: harness.url('/pages/dialog-on-load.html') },
      limits(),
    );
    expect(observation.dialog).toEqual({ type: 'alert', message: 'Welcome aboard' });
    expect(observation.url).toBe(harness.url('/pages/dialog-on-load.html'));
    expect(observation.title).toBe('Welcome');
    const accepted = (await answer(engine, observation, 'accept')).observation;
    expect(accepted.text).toContain('After the welcome');
  });

  // The page's own text is the page's (DESIGN §12): a password the model typed is its to see; a
  // run's declared secret is struck, wherever the page echoes it.
  it("clips a long message and strikes the run's declared secret from it", async () => {
    const { engine } = await harness.engine();
    engine.useSecrets([{ name: 'pw', value: 'hunter22', origins: [harness.server.origin] }]);
    const signIn = (await engine.navigate({ url: harness.url('/pages/dialog-secret.html') }, limits()))
      .observation;
    const filled = (
      await engine.act(
        {
          revision: signIn.revision,
          element: ref(signIn, 'Password'),
          action: 'fill',
          text: '{{secret:pw}}',
        },
        limits(),
      )
    ).observation;
    const held = await click(engine, filled, 'Reveal');
    expect(held.dialog?.message).toMatch(/^You typed \[secret:pw\] x+$/);
    // Clipped as the page gave it, then struck: the marker is longer than the value it replaces.
    expect(held.dialog?.message).toHaveLength(
      DIALOG_MESSAGE_LIMIT_CHARS - 'hunter22'.length + '[secret:pw]'.length,
    );
    expect(JSON.stringify(held)).not.toContain('hunter22');
  });

  it('takes no screenshot while a dialog holds the page, and one once it is answered', async () => {
    const { engine, observation } = await buttonsPage();
    const held = await engine.act(
      { revision: observation.revision, element: ref(observation, 'Alert'), action: 'click' },
      limits(),
    );
    expect(held.observation.dialog?.type).toBe('alert');
    expect(await engine.screenshot({ timeoutMs: 5_000 })).toEqual({ ok: false, reason: 'dialog_open' });
    await engine.act(
      { revision: held.observation.revision, element: DIALOG_REF, action: 'accept' },
      limits(),
    );
    expect((await engine.screenshot({ timeoutMs: 5_000 })).ok).toBe(true);
  });

  it('shows the beforeunload dialog a navigation meets, and goes on or stays as it is answered', async () => {
    const { engine } = await harness.engine();
    const draft = (await engine.navigate({ url: harness.url('/pages/dialog-leaving.html') }, limits()))
      .observation;
    // A page asks before it is left only once a person has used it.
    await click(engine, draft, 'Edit');
    const asked = (await engine.navigate({ url: harness.url('/pages/second.html') }, limits())).observation;
    expect(asked.dialog?.type).toBe('beforeunload');
    expect(asked.url).toBe(harness.url('/pages/dialog-leaving.html'));
    const stayed = (await answer(engine, asked, 'dismiss')).observation;
    expect(stayed.url).toBe(harness.url('/pages/dialog-leaving.html'));
    expect(stayed.text).toContain('edited');

    const askedAgain = (await engine.navigate({ url: harness.url('/pages/second.html') }, limits()))
      .observation;
    expect(askedAgain.dialog?.type).toBe('beforeunload');
    const left = (await answer(engine, askedAgain, 'accept')).observation;
    expect(left.url).toBe(harness.url('/pages/second.html'));
    expect(left.dialog).toBeUndefined();
  });

  it('dismisses a dialog nobody answered when the engine lets its page go, so the page goes on', async () => {
    const { engine, page, observation } = await buttonsPage();
    const asked = await click(engine, observation, 'Confirm');
    expect(asked.dialog?.type).toBe('confirm');
    await engine.release();
    expect(await page.evaluate(`document.getElementById('log').textContent`)).toBe('kept');
  });
});
