import { type Html, html } from './html.js';

/**
 * The live view of a leased page (a run's, a profile's sign-in): a canvas fed by the page's stream
 * of frames (server-sent events behind the session cookie), the page's URL, and a badge saying who
 * acts: "the agent is acting", "waiting for you", "you have the page" (or another person has it).
 * While this viewer holds the page, its mouse, wheel and keyboard on the canvas are sent in small
 * batches to `inputUrl` with the session's CSRF token. A JavaScript dialog of the page, which no
 * frame paints, is drawn over the canvas with the page's URL; the holder answers it there.
 * `fallback` (the newest screenshot) shows until the first frame, and again when the stream is not
 * there.
 */
export function liveViewFragment(options: {
  streamUrl: string;
  inputUrl: string;
  /** The data plane's name of this viewer when it holds the page: `principal:<id>`. */
  holder: string;
  /** The page waits on a person (an approval, a request for a person). */
  waitingForYou: boolean;
  fallback?: Html;
  label: string;
}): Html {
  return html`<section id="live-view" class="live-view" data-stream="${options.streamUrl}" data-input="${options.inputUrl}" data-holder="${options.holder}" data-waiting="${options.waitingForYou ? 'yes' : 'no'}">
<h2>Live view</h2>
<p class="live-bar"><span class="live-state" data-state="${options.waitingForYou ? 'waiting' : 'agent'}">${options.waitingForYou ? 'waiting for you' : 'the agent is acting'}</span> <code class="live-url"></code></p>
<p class="live-blocked error" hidden></p>
<p class="live-input-problem error" role="alert" hidden></p>
<div class="live-stage">
<canvas class="live-canvas" tabindex="0" width="0" height="0" hidden aria-label="${options.label}"></canvas>
<div class="live-dialog" role="alertdialog" aria-label="The page asks" hidden>
<p><strong class="live-dialog-kind"></strong> <code class="live-dialog-url"></code></p>
<p class="live-dialog-message"></p>
<p class="live-dialog-prompt" hidden><input class="live-dialog-text" type="text" maxlength="1000" autocomplete="off" aria-label="Your answer"></p>
<p class="live-dialog-actions"><button type="button" class="live-dialog-accept">OK</button> <button type="button" class="live-dialog-dismiss">Cancel</button></p>
<p class="live-dialog-watching" hidden>Take the page over to answer it.</p>
</div>
</div>
<div class="live-fallback">${options.fallback ?? html`<p class="empty">No frame yet.</p>`}</div>
</section>`;
}

/**
 * The live view's part of the pages' script (no build step: the browser's own JavaScript). Frames
 * are drawn on a canvas from their bytes (the pages' policy allows images from the API alone, and
 * a canvas draws without fetching); a frame that comes while one is drawn replaces it. Input goes
 * only while the stream says this viewer holds the page, in batches of at most 50 events. The
 * page's open dialog (the stream's `dialog` event) is shown over the canvas as text, never as markup.
 */
export const LIVE_VIEW_SCRIPT = `
  const liveViews = new Map();
  function startLiveView(section) {
    if (!section || liveViews.get(section.dataset.stream)?.open()) return;
    const canvas = section.querySelector('.live-canvas');
    const fallback = section.querySelector('.live-fallback');
    const badge = section.querySelector('.live-state');
    const urlText = section.querySelector('.live-url');
    const blockedText = section.querySelector('.live-blocked');
    const inputProblem = section.querySelector('.live-input-problem');
    const dialogBox = section.querySelector('.live-dialog');
    const dialogText = section.querySelector('.live-dialog-text');
    const context = canvas.getContext('2d');
    const view = { source: undefined, width: 0, height: 0, holding: false, queue: [], sending: false, dialog: null,
      drawing: false, nextFrame: undefined, open: () => view.source && view.source.readyState !== 2 };
    liveViews.set(section.dataset.stream, view);
    const say = (state, text) => { badge.dataset.state = state; badge.textContent = text; };
    async function draw(frame) {
      if (view.drawing) { view.nextFrame = frame; return; }
      view.drawing = true;
      try {
        const bytes = Uint8Array.from(atob(frame.jpeg), (c) => c.charCodeAt(0));
        const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/jpeg' }));
        if (canvas.width !== bitmap.width || canvas.height !== bitmap.height) {
          canvas.width = bitmap.width; canvas.height = bitmap.height;
        }
        context.drawImage(bitmap, 0, 0);
        bitmap.close();
        view.width = frame.width; view.height = frame.height;
        urlText.textContent = frame.url;
        canvas.hidden = false; fallback.hidden = true;
        canvas.dataset.frames = String(Number(canvas.dataset.frames || 0) + 1);
      } catch {
        // A frame that does not decode is skipped; the next one replaces it.
      } finally {
        view.drawing = false;
        const next = view.nextFrame; view.nextFrame = undefined;
        if (next) void draw(next);
      }
    }
    const source = new EventSource(section.dataset.stream);
    view.source = source;
    source.addEventListener('frame', (event) => void draw(JSON.parse(event.data)));
    source.addEventListener('state', (event) => {
      const person = JSON.parse(event.data).person;
      view.holding = person !== null && person.holder === section.dataset.holder;
      canvas.classList.toggle('holding', view.holding);
      if (view.holding) say('you', 'you have the page');
      else if (person !== null) say('person', 'a person has the page');
      else if (section.dataset.waiting === 'yes') say('waiting', 'waiting for you');
      else say('agent', 'the agent is acting');
      showDialog();
    });
    const DIALOG_KINDS = { alert: 'The page says', confirm: 'The page asks', prompt: 'The page asks',
      beforeunload: 'Leave this page? Changes may not be kept.' };
    function showDialog() {
      const dialog = view.dialog;
      dialogBox.hidden = dialog === null;
      if (dialog === null) return;
      dialogBox.querySelector('.live-dialog-kind').textContent = DIALOG_KINDS[dialog.type] ?? 'The page asks';
      dialogBox.querySelector('.live-dialog-url').textContent = dialog.url;
      dialogBox.querySelector('.live-dialog-message').textContent = dialog.message;
      dialogBox.querySelector('.live-dialog-prompt').hidden = dialog.type !== 'prompt';
      dialogBox.querySelector('.live-dialog-accept').textContent = dialog.type === 'beforeunload' ? 'Leave' : 'OK';
      const dismiss = dialogBox.querySelector('.live-dialog-dismiss');
      dismiss.textContent = dialog.type === 'beforeunload' ? 'Stay' : 'Cancel';
      dismiss.hidden = dialog.type === 'alert';
      dialogBox.querySelector('.live-dialog-actions').hidden = !view.holding;
      dialogBox.querySelector('.live-dialog-watching').hidden = view.holding;
    }
    source.addEventListener('dialog', (event) => {
      view.dialog = JSON.parse(event.data).dialog;
      if (view.dialog?.type === 'prompt') dialogText.value = view.dialog.default_value ?? '';
      showDialog();
    });
    function answerDialog(accept) {
      if (!view.holding || view.dialog === null) return;
      const text = accept && view.dialog.type === 'prompt' ? dialogText.value.slice(0, 1000) : undefined;
      push(text === undefined ? { type: 'dialog', accept } : { type: 'dialog', accept, text });
    }
    dialogBox.querySelector('.live-dialog-accept').addEventListener('click', () => answerDialog(true));
    dialogBox.querySelector('.live-dialog-dismiss').addEventListener('click', () => answerDialog(false));
    dialogText.addEventListener('keydown', (event) => {
      if (event.key === 'Enter') { event.preventDefault(); answerDialog(true); }
      if (event.key === 'Escape') { event.preventDefault(); answerDialog(false); }
    });
    source.addEventListener('blocked', (event) => {
      const blocked = JSON.parse(event.data);
      blockedText.textContent = 'The page tried to leave the profile\\'s allowed origins and was stopped (' +
        (blocked.navigations + blocked.popups) + ').';
      blockedText.hidden = false;
    });
    source.addEventListener('error', () => {
      if (source.readyState === 2) { canvas.hidden = true; fallback.hidden = false; view.dialog = null; showDialog(); }
    });

    function point(event) {
      const box = canvas.getBoundingClientRect();
      return {
        x: Math.max(0, Math.round(((event.clientX - box.left) / box.width) * view.width)),
        y: Math.max(0, Math.round(((event.clientY - box.top) / box.height) * view.height)),
      };
    }
    const BUTTONS = ['left', 'middle', 'right'];
    function push(input) {
      if (!view.holding) return;
      view.queue.push(input);
      void flush();
    }
    async function flush() {
      if (view.sending || view.queue.length === 0) return;
      view.sending = true;
      try {
        while (view.queue.length > 0) {
          const events = view.queue.splice(0, 50);
          const answer = await fetch(section.dataset.input, {
            method: 'POST',
            credentials: 'same-origin',
            headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
            body: JSON.stringify({ events }),
          }).catch(() => undefined);
          if (answer?.ok) { inputProblem.hidden = true; continue; }
          // What was typed after a refused batch would reach the page with a gap in it: it is let
          // go too, and the person is told to type it again rather than left with a short password.
          view.queue.length = 0;
          const body = answer ? await answer.json().catch(() => ({})) : {};
          const why = body?.error?.message ?? (answer ? 'refused (' + answer.status + ')' : 'the API did not answer');
          inputProblem.textContent = 'Some input did not reach the page (' + why + '); type it again.';
          inputProblem.hidden = false;
        }
      } finally {
        view.sending = false;
      }
    }
    let lastMoveMs = 0;
    canvas.addEventListener('mousemove', (event) => {
      if (!view.holding || Date.now() - lastMoveMs < 50) return;
      lastMoveMs = Date.now();
      push({ type: 'mouse', action: 'move', ...point(event) });
    });
    for (const [name, action] of [['mousedown', 'down'], ['mouseup', 'up']]) {
      canvas.addEventListener(name, (event) => {
        if (!view.holding) return;
        event.preventDefault();
        canvas.focus();
        push({ type: 'mouse', action, ...point(event), button: BUTTONS[event.button] ?? 'left', clicks: Math.min(3, Math.max(1, event.detail || 1)) });
      });
    }
    canvas.addEventListener('contextmenu', (event) => { if (view.holding) event.preventDefault(); });
    canvas.addEventListener('wheel', (event) => {
      if (!view.holding) return;
      event.preventDefault();
      push({ type: 'wheel', ...point(event), dx: Math.round(event.deltaX), dy: Math.round(event.deltaY) });
    }, { passive: false });
    for (const [name, action] of [['keydown', 'down'], ['keyup', 'up']]) {
      canvas.addEventListener(name, (event) => {
        if (!view.holding || event.isComposing) return;
        event.preventDefault();
        push({ type: 'key', action, key: event.key.slice(0, 32), code: event.code.slice(0, 32) });
      });
    }
    canvas.addEventListener('paste', (event) => {
      const text = event.clipboardData?.getData('text/plain');
      if (!view.holding || !text) return;
      event.preventDefault();
      push({ type: 'text', text: text.slice(0, 1000) });
    });
  }
  function keepLiveView(current, next) {
    const kept = current?.querySelector('#live-view');
    const slot = next.querySelector('#live-view');
    if (kept && slot && kept.dataset.stream === slot.dataset.stream) {
      kept.dataset.waiting = slot.dataset.waiting;
      // The stream and its canvas stay; the newest screenshot beneath them is the server's.
      const fallback = kept.querySelector('.live-fallback');
      const fresh = slot.querySelector('.live-fallback');
      if (fallback && fresh) fallback.replaceChildren(...fresh.childNodes);
      slot.replaceWith(kept);
    }
  }
`;
