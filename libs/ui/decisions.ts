import type { ApprovalView } from '../contracts/index.js';
import { formatDuration, formatTime, type Html, html } from './html.js';

/** What was asked, as the card names it: the action on the element, or the person asked for. */
function askedFor(approval: ApprovalView): Html {
  if (approval.kind === 'person') return html`a person on the page: ${approval.person?.reason ?? ''}`;
  const card = approval.card;
  const element = card?.element ? html` on ${card.element.role} “${card.element.name}”` : '';
  const file = card?.file ? html` of ${fileLabel(card.file)}` : '';
  return html`${card?.action ?? approval.tool}${file}${element}`;
}

/** An upload's file as a card names it: the name it was uploaded with, and its id. */
export function fileLabel(file: { id: string; name: string | null }): Html {
  return file.name === null ? html`file ${file.id}` : html`“${file.name}” (${file.id})`;
}

function grantLine(approval: ApprovalView): Html | '' {
  const grant = approval.grant;
  if (!grant) return approval.grant_id ? html`<p class="grant">With a grant (${approval.grant_id}).</p>` : '';
  return html`<p class="grant">With a grant of ${grant.max_actions} more actions for ${formatDuration(grant.expires_at_ms - grant.created_at_ms)}: ${grant.used_actions} used, until ${formatTime(grant.expires_at_ms)}.</p>`;
}

/** One decision: what was asked and when; who decided, when, how, with which grant and why. */
function decision(approval: ApprovalView): Html {
  const decided =
    approval.status === 'pending'
      ? html`<p class="decided">Waiting for a decision.</p>`
      : approval.status === 'expired'
        ? html`<p class="decided">Expired${approval.decided_at_ms ? html` at ${formatTime(approval.decided_at_ms)}` : ''} without a decision.</p>`
        : html`<p class="decided"><span class="decision-status">${approval.status}</span> by <b class="decided-by">${approval.decided_by ?? 'unknown'}</b> at <time>${formatTime(approval.decided_at_ms)}</time></p>`;
  return html`<li class="decision decision-${approval.status}" data-approval-id="${approval.id}">
<p class="asked">Asked ${formatTime(approval.created_at_ms)}: ${askedFor(approval)}</p>
${decided}${grantLine(approval)}
${approval.reason ? html`<p class="reason">Reason: ${approval.reason}</p>` : ''}</li>`;
}

/**
 * Every approval the run asked for, oldest first, kept after it was decided: who decided, when,
 * the grant it gave and the reason. `problem` says why they could not be read.
 */
export function decisionTimeline(approvals: readonly ApprovalView[], problem?: string): Html {
  return html`<section id="decisions"><h2>Decisions</h2>${
    problem
      ? html`<p class="error">${problem}</p>`
      : approvals.length === 0
        ? html`<p class="empty">No approvals asked for.</p>`
        : html`<ol class="decisions">${approvals.map(decision)}</ol>`
  }</section>`;
}
