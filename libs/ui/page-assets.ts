import { LIST_PAGES_STYLE } from './list-pages-style.js';
import { LIVE_VIEW_SCRIPT } from './live-view.js';
import { RUNS_LIST_SCRIPT } from './runs-list-script.js';

/**
 * The run pages' one script and one stylesheet, served as files by the API (the pages' policy
 * allows no inline script or style). The script has no build step: it is the browser's own
 * JavaScript, kept small. What it does:
 * - Approve / Deny post to the same /v1 approval routes a key would, with the session's CSRF
 *   token (from the page's meta tag) in `X-CSRF-Token`; the cookie is sent by the browser;
 * - while the run may still act, it listens to the run's event stream (the cookie again) and on
 *   each event fetches the page anew and swaps in its run section: the live frame (the newest
 *   screenshot), the meters, the timeline and any approval, all rendered by the server;
 * - Take over / Hand back post to `/v1/runs/{id}/takeover` and `…/handback`, the same way, and
 *   Cancel / Retry to `…/cancel` and `…/retry`;
 * - the scrubber plays the steps' screenshots in order (a slider and Play);
 * - while a screenshot is pending (taken after its call answered), it fetches the page each second
 *   until the screenshot is stored or failed;
 * - a live view (libs/ui/live-view.ts) streams the leased page and, while this viewer holds it,
 *   sends its input; a refresh keeps it as it is.
 */
export const PAGE_SCRIPT = `'use strict';
/**
 * How long a page waits before it reads itself again after a refused or lost re-read: a store that
 * did not answer (5xx), a lost connection (no answer) or the key's request rate (429, once its
 * Retry-After has passed). Undefined for a refusal that reading again cannot change (401, 404).
 * Without it the page would stay as it was until the next event, which may never come.
 */
function rereadAfterMs(response) {
  if (response && response.status < 500 && response.status !== 429) return undefined;
  const afterMs = Number(response?.headers.get('retry-after')) * 1000;
  return afterMs > 2000 ? afterMs : 2000;
}
(() => {
  const csrf = document.querySelector('meta[name="csrf-token"]')?.getAttribute('content') ?? '';
  const LISTENED = ['run.claimed', 'run.resumed', 'run.parked', 'run.waiting', 'run.requeued', 'run.succeeded',
    'run.failed', 'run.cancelled', 'run.retried', 'approval.requested', 'approval.approved', 'approval.denied',
    'step.started', 'step.ended', 'person.requested', 'person.taken_over', 'person.handed_back'];
  let source;
  /** How long the page waits before it asks again after the API did not answer. */
  const RETRY_MS = 2000;
  let refreshing = false;${LIVE_VIEW_SCRIPT}
  let again = false;

  async function refresh() {
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do {
        again = false;
        const response = await fetch(location.href, { credentials: 'same-origin' }).catch(() => undefined);
        if (!response?.ok) {
          const afterMs = rereadAfterMs(response);
          if (afterMs !== undefined) setTimeout(() => void refresh(), afterMs);
          return;
        }
        const doc = new DOMParser().parseFromString(await response.text(), 'text/html');
        // The run page's run, or the approvals page's list: what a decision or an event changes.
        const rootId = document.getElementById('run') ? 'run' : 'approvals-page';
        const next = doc.getElementById(rootId);
        const current = document.getElementById(rootId);
        if (!next || !current) return;
        const adopted = document.adoptNode(next);
        keepLiveView(current, adopted);
        current.replaceWith(adopted);
        bindDecisions(adopted);
        startLiveView(document.getElementById('live-view'));
        if (next.dataset.live !== 'yes' && source) { source.close(); source = undefined; }
      } while (again);
      if (pendingPolls === 0) pollPending();
    } finally {
      refreshing = false;
    }
  }

  function bindPersonControls(root) {
    for (const button of root.querySelectorAll('button.person-control')) {
      button.addEventListener('click', async () => {
        if (await postRunAction(button, button.parentElement?.querySelector('.person-error'))) await refresh();
      });
    }
  }

  // A button's POST to its run's /v1 route (data-action); a refusal is shown in \`problem\` and the
  // button offered again. True when the API took it.
  async function postRunAction(button, problem) {
    button.disabled = true;
    const response = await fetch('/v1/runs/' + encodeURIComponent(button.dataset.runId) + '/' + button.dataset.action, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'x-csrf-token': csrf },
    });
    if (response.ok) return true;
    const answer = await response.json().catch(() => ({}));
    if (problem) { problem.textContent = answer?.error?.message ?? 'refused (' + response.status + ')'; problem.hidden = false; }
    button.disabled = false;
    return false;
  }

  // Cancel and Retry post to the run's /v1 routes; a retried run is queued again, so the page is
  // read anew whole (it listens to the run's events again).
  function bindRunControls(root) {
    for (const button of root.querySelectorAll('button.run-control')) {
      button.addEventListener('click', async () => {
        if (!(await postRunAction(button, root.querySelector('.run-control-error')))) return;
        if (button.dataset.action === 'retry') location.reload();
        else await refresh();
      });
    }
  }

  // The screenshots' scrubber: the slider picks a step's screenshot, Play steps through them.
  function bindScrubber(root) {
    const scrubber = root.querySelector('#scrubber');
    if (!scrubber) return;
    const frames = [...scrubber.querySelectorAll('.scrub-frames li')];
    const range = scrubber.querySelector('.scrub-range');
    const image = scrubber.querySelector('.scrub-frame');
    const label = scrubber.querySelector('.scrub-label');
    const count = scrubber.querySelector('.scrub-count');
    const play = scrubber.querySelector('.scrub-play');
    let timer;
    const show = (index) => {
      const frame = frames[index];
      if (!frame) return;
      range.value = String(index);
      image.src = frame.dataset.src;
      label.textContent = frame.dataset.label;
      count.textContent = (index + 1) + ' of ' + frames.length;
    };
    const stop = () => { clearInterval(timer); timer = undefined; play.textContent = 'Play'; };
    range.addEventListener('input', () => { stop(); show(Number(range.value)); });
    play.addEventListener('click', () => {
      if (timer) return stop();
      if (Number(range.value) >= frames.length - 1) show(0);
      play.textContent = 'Pause';
      timer = setInterval(() => {
        const next = Number(range.value) + 1;
        if (next >= frames.length) return stop();
        show(next);
      }, 800);
    });
  }

  function bindDecisions(root) {
    bindPersonControls(root);
    bindRunControls(root);
    bindScrubber(root);
    for (const form of root.querySelectorAll('form.decide')) {
      form.addEventListener('submit', async (event) => {
        event.preventDefault();
        const decision = event.submitter?.value === 'deny' ? 'deny' : 'approve';
        const data = new FormData(form);
        const minutes = Number(data.get('grant_minutes'));
        const actions = Number(data.get('grant_actions'));
        const body = decision === 'deny'
          ? { reason: String(data.get('reason') || 'denied from the run page') }
          : minutes > 0 && actions > 0 ? { grant: { duration_ms: minutes * 60000, max_actions: actions } } : {};
        const problem = form.querySelector('.error');
        for (const button of form.querySelectorAll('button')) button.disabled = true;
        const response = await fetch('/v1/approvals/' + encodeURIComponent(form.dataset.approvalId) + '/' + decision, {
          method: 'POST',
          credentials: 'same-origin',
          headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
          body: JSON.stringify(body),
        });
        if (!response.ok) {
          const answer = await response.json().catch(() => ({}));
          problem.textContent = answer?.error?.message ?? 'refused (' + response.status + ')';
          problem.hidden = false;
          for (const button of form.querySelectorAll('button')) button.disabled = false;
          return;
        }
        await refresh();
      });
    }
  }

  // A screenshot is taken after its call answered: while one is pending, the page is fetched
  // again each second until it is stored or failed (at most a minute's worth: a run that ended
  // hears no more events).
  let pendingPolls = 0;
  function pollPending() {
    if (!document.querySelector('#run .shot-pending, #approvals-page .shot-pending') || pendingPolls >= 60) { pendingPolls = 0; return; }
    pendingPolls += 1;
    setTimeout(() => { void refresh().then(pollPending); }, 1000);
  }

  // A profile's sign-in page: it beats while open, as often as the page says (its lease lives a
  // short while past each beat),
  // and Done / Cancel end it; the page is then read again to show how it ended.
  const signIn = document.getElementById('profile-sign-in');
  if (signIn && signIn.dataset.status === 'open') {
    const post = (path) => fetch(signIn.dataset.base + path, {
      method: 'POST', credentials: 'same-origin', headers: { 'x-csrf-token': csrf },
    });
    // A beat at once: the page may open late in its lease (a slow load, a sign-in first).
    void post('/heartbeat');
    const beat = setInterval(() => void post('/heartbeat'), Number(signIn.dataset.beatMs) || 30000);
    for (const [selector, path] of [['.sign-in-done', '/done'], ['.sign-in-cancel', '/cancel']]) {
      signIn.querySelector(selector)?.addEventListener('click', async () => {
        clearInterval(beat);
        for (const button of signIn.querySelectorAll('button')) button.disabled = true;
        const response = await post(path);
        if (!response.ok) {
          const answer = await response.json().catch(() => ({}));
          const problem = signIn.querySelector('.sign-in-problem');
          problem.textContent = answer?.error?.message ?? 'refused (' + response.status + ')';
          problem.hidden = false;
          return;
        }
        location.reload();
      });
    }
  }

  bindDecisions(document);
  pollPending();
  startLiveView(document.getElementById('live-view'));
  const run = document.getElementById('run');
  // A browser reconnects a stream that broke, but never one the API answered with an error (a 503
  // while Redis is away): that one is opened again here, and the page read anew for what it missed.
  function listen() {
    source = new EventSource('/v1/runs/' + encodeURIComponent(run.dataset.runId) + '/events');
    for (const type of LISTENED) source.addEventListener(type, () => void refresh());
    source.addEventListener('error', () => {
      if (source?.readyState !== EventSource.CLOSED) return;
      source = undefined;
      setTimeout(() => {
        if (document.getElementById('run')?.dataset.live !== 'yes') return;
        listen();
        void refresh();
      }, RETRY_MS);
    });
  }
  if (run && run.dataset.live === 'yes') listen();
})();
${RUNS_LIST_SCRIPT}`;

export const PAGE_STYLE = `body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1d2330; background: #f6f7f9; }
header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1.2rem; background: #1d2330; color: #fff; }
header a, header .brand { color: #fff; font-weight: 600; text-decoration: none; }
header .viewer { margin-left: auto; opacity: .8; }
main { max-width: 70rem; margin: 0 auto; padding: 1rem 1.2rem 3rem; }
table.runs { width: 100%; border-collapse: collapse; background: #fff; }
table.runs th, table.runs td { text-align: left; padding: .4rem .6rem; border-bottom: 1px solid #e3e6eb; }
.filters, .signin { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; margin: .8rem 0; }
.status { padding: .05rem .5rem; border-radius: .8rem; background: #e3e6eb; font-size: .85em; }
.status-succeeded { background: #cdebd6; } .status-failed, .status-cancelled { background: #f4d0d0; }
.status-running { background: #d3e3fa; } .status-parked { background: #fbe7b5; }
dl.summary { display: grid; grid-template-columns: max-content 1fr; gap: .2rem 1rem; }
dl.summary dt { font-weight: 600; } dd { margin: 0; }
.meters { display: grid; grid-template-columns: repeat(auto-fit, minmax(14rem, 1fr)); gap: .6rem; }
.meters h2 { grid-column: 1 / -1; margin-bottom: 0; }
.meter { background: #fff; padding: .5rem .7rem; border-radius: .4rem; display: grid; gap: .2rem; }
.meter meter { width: 100%; }
.approval { background: #fffaf0; border: 2px solid #e9b949; border-radius: .5rem; padding: .6rem 1rem; margin: .6rem 0; }
.approval-shot, #live-frame { max-width: 100%; border: 1px solid #ccd; }
.live-canvas { max-width: 100%; border: 1px solid #ccd; display: block; }
.live-canvas.holding { outline: 3px solid #e9b949; cursor: default; }
.live-state { padding: .05rem .5rem; border-radius: .8rem; background: #d3e3fa; font-size: .85em; }
.live-state[data-state="waiting"], .live-state[data-state="you"] { background: #fbe7b5; }
.live-url { opacity: .8; word-break: break-all; }
.live-stage { position: relative; }
.live-dialog { position: absolute; top: 1.5rem; left: 50%; transform: translateX(-50%); width: min(28rem, 90%);
  background: #fff; border: 1px solid #889; border-radius: .5rem; box-shadow: 0 .4rem 1.2rem rgba(0,0,0,.3); padding: .4rem 1rem; }
.live-dialog-message { white-space: pre-wrap; word-break: break-word; }
.live-dialog-url { opacity: .8; word-break: break-all; font-size: .85em; }
.live-dialog-text { width: 100%; box-sizing: border-box; }
.decide { display: flex; flex-wrap: wrap; gap: .6rem; align-items: end; }
.decide fieldset { display: flex; gap: .6rem; }
button.approve { background: #1f7a3d; color: #fff; } button.deny { background: #a32121; color: #fff; }
button { border: 0; border-radius: .3rem; padding: .35rem .9rem; cursor: pointer; background: #2f4d8a; color: #fff; }
ol.steps { list-style: none; padding: 0; }
.step { background: #fff; border-radius: .4rem; padding: .5rem .8rem; margin: .4rem 0; }
.step .kind { text-transform: uppercase; font-size: .75em; opacity: .7; }
.step .duration { float: right; opacity: .7; }
.step pre { white-space: pre-wrap; word-break: break-all; margin: .2rem 0; font-size: .85em; }
.thumb { max-width: 20rem; border: 1px solid #ccd; display: block; }
.shot-pending, .shot-failed { color: #667; font-style: italic; }
.error { color: #a32121; } .empty { opacity: .7; }
.person-request { border-color: #2f4d8a; background: #f0f4fb; }
.person-controls { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; margin: .6rem 0; }
.person-controls .hint { opacity: .75; font-size: .9em; }
.run-controls { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; margin: .6rem 0; }
button.cancel { background: #a32121; } .queue-job { font-size: .9em; }
.attempt { border-left: 3px solid #2f4d8a; padding-left: .8rem; margin: 1rem 0; }
.attempt h3 { margin: .2rem 0; } .attempt-times { opacity: .75; margin: .1rem 0; }
ol.decisions { list-style: none; padding: 0; }
.decision { background: #fff; border-left: 4px solid #e3e6eb; border-radius: .3rem; padding: .4rem .8rem; margin: .4rem 0; }
.decision p { margin: .15rem 0; }
.decision-approved { border-color: #1f7a3d; } .decision-denied { border-color: #a32121; }
.decision-pending { border-color: #e9b949; } .decision-expired { border-color: #889; }
.decision-status { text-transform: capitalize; font-weight: 600; }
.act-target .element { font-weight: 600; }
.postcondition-satisfied { color: #1f7a3d; } .postcondition-not_observed, .postcondition-ambiguous { color: #a32121; }
.page-log { background: #fdf3f3; border-radius: .3rem; padding: .3rem .6rem; margin: .3rem 0; }
.page-log ul { margin: .2rem 0; padding-left: 1.2rem; } .page-log code { word-break: break-all; }
.page-log .source { opacity: .7; font-size: .85em; word-break: break-all; }
#scrubber .scrub-controls { display: flex; flex-wrap: wrap; gap: .6rem; align-items: center; }
.scrub-range { flex: 1 1 12rem; }
.scrub-frame { max-width: 100%; max-height: 28rem; border: 1px solid #ccd; display: block; margin-top: .4rem; }
${LIST_PAGES_STYLE}`;
