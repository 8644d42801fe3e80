import type { ApprovalView, RunView } from '../contracts/index.js';
import { formatTime, type Html, html, type PageViewer } from './html.js';

/**
 * A person on the run's page, as the run page shows it: a request for a person (the agent asked),
 * who holds the page and until when, and the Take over / Hand back buttons — only for the run's
 * own principal (anyone else with the page open may watch). The page's script posts the buttons
 * to `/v1/runs/{id}/takeover` and `…/handback` with the session's CSRF token.
 */

/** Statuses whose page a person may take over: the run still has it (ADR-0127 d4). */
const TAKEABLE = new Set(['queued', 'running', 'parked']);

function controlButton(run: RunView, action: 'takeover' | 'handback', label: string): Html {
  return html`<button type="button" class="person-control person-${action}" data-run-id="${run.id}" data-action="${action}">${label}</button>`;
}

/** The card of a pending `person` approval: why the agent asked, who holds the page, the buttons. */
export function personCard(run: RunView, approval: ApprovalView, viewer: PageViewer | undefined): Html {
  const person = approval.person;
  const mine = viewer?.principal === run.principal;
  const holder = person?.holder ?? null;
  const yours = holder !== null && holder === `principal:${viewer?.principal ?? ''}`;
  const asked = approval.tool === 'browser.request_person';
  return html`<article class="approval person-request" data-approval-id="${approval.id}">
<h3>${asked ? 'The agent asks for a person' : 'A person has the page'}</h3>
${asked ? html`<p class="reason">${person?.reason ?? ''}</p>` : ''}
${
  holder
    ? html`<p class="holder">${yours ? 'You have the page' : html`<b>${holder}</b> has the page`} until ${formatTime(person?.until_ms ?? null)}. The agent waits; what is typed is never kept.</p>`
    : html`<p class="expires">Waiting for you until ${formatTime(person?.expires_at_ms ?? null)}; after that the run fails <code>person_timeout</code>.</p>`
}
${
  mine
    ? html`<div class="person-controls">${yours ? controlButton(run, 'handback', 'Hand back') : holder ? '' : controlButton(run, 'takeover', 'Take over')}
<p class="error person-error" role="alert" hidden></p></div>`
    : html`<p class="not-yours">Only the run’s principal may take its page over; you may watch.</p>`
}</article>`;
}

/**
 * Take over a run that did not ask: shown to its principal while the run still has its page and
 * no person holds or was asked for it (a pending request shows its own card).
 */
export function takeOverControl(
  run: RunView,
  approvals: readonly ApprovalView[],
  viewer: PageViewer | undefined,
): Html {
  if (viewer?.principal !== run.principal || !TAKEABLE.has(run.status)) return html``;
  if (approvals.some((approval) => approval.kind === 'person')) return html``;
  return html`<section id="person"><div class="person-controls">${controlButton(run, 'takeover', 'Take over')}
<span class="hint">The run pauses at its next step, never inside an act; you get its page until you hand it back.</span>
<p class="error person-error" role="alert" hidden></p></div></section>`;
}
