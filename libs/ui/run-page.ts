import type { ApprovalView, RunFile, RunStep, RunView } from '../contracts/index.js';
import { decisionTimeline, fileLabel } from './decisions.js';
import { formatTime, type Html, html, type PageViewer, pageLayout } from './html.js';
import { liveViewFragment } from './live-view.js';
import { personCard, takeOverControl } from './person-card.js';
import { attemptSections, screenshotScrubber } from './run-attempts.js';
import { filesSection } from './run-files.js';
import { outputSection } from './run-output.js';
import { artifactUrl, screenshotOf } from './screenshots.js';

export { artifactUrl } from './screenshots.js';

/** Statuses after which a run changes no more: its page stops listening. */
const ENDED = new Set(['succeeded', 'failed', 'cancelled']);

function meter(label: string, used: number, limit: number | null, shown = String(used)): Html {
  return html`<div class="meter"><span class="meter-label">${label}</span>
${limit === null ? '' : html`<meter min="0" max="${limit}" value="${Math.min(used, limit)}" high="${limit * 0.8}"></meter>`}
<span class="meter-value">${shown}${limit === null ? ' (no limit)' : html` of ${limit}`}</span></div>`;
}

function meters(run: RunView): Html {
  const costUsd = (run.usage.cost_micro_usd / 1e6).toFixed(4);
  const limitUsd = run.limits.max_cost_micro_usd === null ? null : run.limits.max_cost_micro_usd / 1e6;
  return html`<section id="meters" class="meters"><h2>Usage</h2>
${meter('Steps', run.usage.steps, run.limits.max_steps)}
${meter('Model calls', run.usage.model_calls, run.limits.max_model_calls)}
${meter('Tool calls', run.usage.tool_calls, run.limits.max_tool_calls)}
${meter('Cost (USD)', run.usage.cost_micro_usd / 1e6, limitUsd, `$${costUsd}`)}</section>`;
}

function summary(run: RunView): Html {
  const answer = (run.result as { answer?: unknown } | null)?.answer;
  return html`<dl class="summary">
<dt>Status</dt><dd><span id="run-status" class="status status-${run.status}">${run.status}</span>${
    run.waiting_for ? html` (waiting for ${run.waiting_for})` : ''
  }</dd>
<dt>Session</dt><dd>${run.session_id}</dd><dt>Profile</dt><dd>${run.browser_profile_id ?? '—'}</dd>
<dt>Attempt</dt><dd>${run.attempt}</dd>
<dt>Created</dt><dd>${formatTime(run.created_at_ms)}</dd><dt>Ended</dt><dd>${formatTime(run.ended_at_ms)}</dd>
${run.error ? html`<dt>Error</dt><dd class="error">${run.error.code}: ${run.error.message}</dd>` : ''}
${answer !== undefined ? html`<dt>Answer</dt><dd class="answer">${String(answer)}</dd>` : ''}</dl>`;
}

/**
 * Cancel while the run may still act, Retry once it failed (a new attempt of the same run, as
 * `POST /v1/runs/{id}/retry`): posted by the page's script with the session's CSRF token. For a
 * fleet operator, the run's current queue job in the dashboard.
 */
function runControls(run: RunView, queueJobUrl: string | undefined): Html {
  const ended = ENDED.has(run.status);
  return html`<div class="run-controls">${
    ended
      ? ''
      : html`<button type="button" class="run-control cancel" data-action="cancel" data-run-id="${run.id}"${run.cancel_requested ? html` disabled` : ''}>${run.cancel_requested ? 'Cancel requested' : 'Cancel'}</button>`
  }${
    run.status === 'failed'
      ? html`<button type="button" class="run-control retry" data-action="retry" data-run-id="${run.id}">Retry</button>`
      : ''
  }${queueJobUrl ? html`<a class="queue-job" href="${queueJobUrl}">Queue job in the dashboard</a>` : ''}
<p class="error run-control-error" role="alert" hidden></p></div>`;
}

/**
 * The pending approval as the person deciding it needs it: what, where, and the outlined page —
 * with Approve and Deny, or, where the viewer's key may not decide it, `decisionRefused` instead.
 */
export function approvalCard(runId: string, approval: ApprovalView, decisionRefused?: string): Html {
  const card = approval.card;
  const element = card?.element ? `${card.element.role} “${card.element.name}”` : 'an element of the page';
  return html`<article class="approval" data-approval-id="${approval.id}">
<h3>Approve ${card?.action ?? approval.tool}${card?.file ? html` of ${fileLabel(card.file)}` : ''} on ${element}?</h3>
<p class="where">Page: ${card?.page_title ? html`<b>${card.page_title}</b> ` : ''}<code class="page-url">${card?.page_url ?? 'unknown'}</code></p>
${
  card?.screenshot
    ? screenshotOf(
        runId,
        card.screenshot,
        card.screenshot_status,
        (src) =>
          html`<img class="approval-shot" src="${src}" alt="The page with the element to act on outlined">`,
      )
    : html`<p class="empty">No screenshot of the page.</p>`
}
<details><summary>The call as recorded</summary><pre>${JSON.stringify(approval.arguments, null, 2)}</pre></details>
${decisionRefused ? html`<p class="not-yours">${decisionRefused}</p>` : decideForm(approval)}</article>`;
}

/** Approve (with an optional grant) and Deny, posted by the page's script to the /v1 routes. */
function decideForm(approval: ApprovalView): Html {
  return html`<form class="decide" data-approval-id="${approval.id}">
<fieldset><legend>Grant (optional): approve this and later actions of this run</legend>
<label>For minutes <input type="number" name="grant_minutes" min="1" max="30"></label>
<label>Actions <input type="number" name="grant_actions" min="1" max="200"></label></fieldset>
<label>Reason to deny <input type="text" name="reason" maxlength="2000"></label>
<button type="submit" name="decision" value="approve" class="approve">Approve</button>
<button type="submit" name="decision" value="deny" class="deny">Deny</button>
<p class="error" role="alert" hidden></p></form>`;
}

/**
 * While the run may still act: a run on a profile streams its page (the live view: while the run's
 * lease is live), with the newest screenshot shown until the first frame and whenever the stream
 * is not there; a run without a page shows its newest screenshot alone.
 */
function liveSection(run: RunView, viewer: PageViewer, latest: string | undefined, waiting: boolean): Html {
  const newest = latest
    ? html`<img id="live-frame" src="${artifactUrl(run.id, latest)}" data-frame="${latest}" alt="The run's page, latest frame">`
    : html`<p id="live-frame-empty" class="empty">No frame yet.</p>`;
  if (!run.browser_profile_id) return html`<section id="live"><h2>Live view</h2>${newest}</section>`;
  const base = `/v1/runs/${encodeURIComponent(run.id)}`;
  return html`<section id="live">${liveViewFragment({
    streamUrl: `${base}/live`,
    inputUrl: `${base}/input`,
    holder: `principal:${viewer.principal}`,
    waitingForYou: waiting || run.status === 'parked' || run.status.startsWith('waiting'),
    fallback: newest,
    label: "The run's page, live",
  })}</section>`;
}

/**
 * The run page: summary, meters, pending approvals, the live view while the run may still act
 * (the page streamed, or the newest screenshot; see liveSection), and the timeline. `data-run-id`
 * and `data-live` tell the script whether to listen.
 */
export function renderRunPage(options: {
  viewer: PageViewer;
  run: RunView;
  steps: readonly RunStep[];
  approvals: readonly ApprovalView[];
  /** Why the viewer's key may not decide this run's approvals: shown in place of Approve and Deny. */
  decisionRefused?: string;
  /** Why no steps could be had, shown in the timeline's place. */
  stepsProblem?: string;
  /** Every approval of the run, decided or not, oldest first (the decisions' timeline). */
  decisions?: readonly ApprovalView[];
  /** Why the decisions could not be read, shown in their place. */
  decisionsProblem?: string;
  /** The run's current job in the queue dashboard: given for a fleet operator's key only. */
  queueJobUrl?: string;
  /** The run's downloads (`GET /v1/runs/{id}/files`). */
  files?: readonly RunFile[];
}): string {
  const { run, steps } = options;
  const live = !ENDED.has(run.status);
  // The newest screenshot that can be shown: stored (or written before its call answered).
  const latest = [...steps]
    .reverse()
    .find((step) => step.tool?.screenshot && (step.tool.screenshot_status?.state ?? 'stored') === 'stored')
    ?.tool?.screenshot;
  const main = html`<div id="run" data-run-id="${run.id}" data-live="${live ? 'yes' : 'no'}">
<h1>Run <code>${run.id}</code></h1>${summary(run)}${runControls(run, options.queueJobUrl)}${outputSection(run)}${filesSection(run.id, options.files ?? [])}${meters(run)}
${takeOverControl(run, options.approvals, options.viewer)}
${
  options.approvals.length > 0
    ? html`<section id="approvals"><h2>Waiting for you</h2>${options.approvals.map((approval) =>
        approval.kind === 'person'
          ? personCard(run, approval, options.viewer)
          : approvalCard(run.id, approval, options.decisionRefused),
      )}</section>`
    : ''
}
${live ? liveSection(run, options.viewer, latest ?? undefined, options.approvals.length > 0) : ''}
${decisionTimeline(options.decisions ?? [], options.decisionsProblem)}
${options.stepsProblem ? '' : screenshotScrubber(run, steps)}
<section id="timeline"><h2>Steps</h2>${
    options.stepsProblem
      ? html`<p class="error">${options.stepsProblem}</p>`
      : steps.length === 0
        ? html`<p class="empty">No steps yet.</p>`
        : attemptSections(run, steps)
  }</section></div>`;
  return pageLayout(`Run ${run.id}`, main, options.viewer);
}
