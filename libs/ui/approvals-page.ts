import type { ApprovalView, RunView } from '../contracts/index.js';
import { formatTime, type Html, html, type PageViewer, pageLayout } from './html.js';
import { personCard } from './person-card.js';
import { approvalCard } from './run-page.js';
import { runTask } from './runs-page.js';

/** A pending approval the viewer may decide, with the run it waits in. */
export interface DecidableApproval {
  approval: ApprovalView;
  run: RunView;
}

/**
 * Every pending approval the signed-in key may decide, newest first, each with the card the run
 * page shows (the same Approve and Deny, posted by the page's script; the list is then read anew).
 * `#approvals-page` is what the script swaps in.
 */
export function renderApprovalsPage(options: {
  viewer: PageViewer;
  pending: readonly DecidableApproval[];
  /** Why none can be decided or read (a key without the scope, the list refused), shown instead. */
  problem?: string;
}): string {
  const { pending, viewer } = options;
  const sorted = [...pending].sort((a, b) => b.approval.created_at_ms - a.approval.created_at_ms);
  const item = ({ approval, run }: DecidableApproval): Html =>
    html`<li class="pending" data-run-id="${run.id}"><p class="in-run">In run <a href="/runs/${run.id}">${runTask(run) || run.id}</a>
<span class="run-meta"><code>${run.id}</code> · asked ${formatTime(approval.created_at_ms)} · by ${run.principal}</span></p>
${approval.kind === 'person' ? personCard(run, approval, viewer) : approvalCard(run.id, approval)}</li>`;
  return pageLayout(
    'Approvals',
    html`<div id="approvals-page" data-live="no"><h1>Approvals waiting for you</h1>
${options.problem ? html`<p class="error" role="alert">${options.problem}</p>` : ''}
${
  sorted.length > 0
    ? html`<ol class="approvals-list">${sorted.map(item)}</ol>`
    : options.problem
      ? ''
      : html`<p class="empty">Nothing waits for you.</p>`
}</div>`,
    viewer,
  );
}
