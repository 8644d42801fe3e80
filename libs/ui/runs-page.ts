import { RUN_STATUSES, type RunView } from '../contracts/index.js';
import { formatTime, type Html, html, type PageViewer, pageLayout } from './html.js';

/** The runs list's filters, as the runs page's form names them and `GET /v1/runs` reads them. */
export const RUN_LIST_FILTERS = [
  'status',
  'session_id',
  'profile_id',
  'created_after',
  'created_before',
] as const;
export type RunListFilters = Partial<Record<(typeof RUN_LIST_FILTERS)[number] | 'cursor' | 'limit', string>>;

/** The sign-in form: the key goes in a password field and leaves only in the POST body. */
export function renderSignInPage(options: { next: string; error?: string }): string {
  return pageLayout(
    'Sign in',
    html`<h1>Sign in</h1>
<p>Sign in with an API key to see your tenant's runs. The key is not kept in the browser: a session cookie is.</p>
${options.error ? html`<p class="error" role="alert">${options.error}</p>` : ''}
<form method="post" action="/signin" class="signin">
<input type="hidden" name="next" value="${options.next}">
<label>API key <input type="password" name="key" autocomplete="current-password" required></label>
<button type="submit">Sign in</button>
</form>`,
  );
}

function filterForm(filters: RunListFilters): Html {
  const text = (name: keyof RunListFilters, label: string, type = 'text') =>
    html`<label>${label} <input type="${type}" name="${name}" value="${filters[name] ?? ''}"></label>`;
  return html`<form method="get" action="/runs" class="filters">
<label>Status <select name="status"><option value="">any</option>${RUN_STATUSES.map(
    (status) =>
      html`<option value="${status}"${filters.status === status ? html` selected` : ''}>${status}</option>`,
  )}</select></label>
${text('session_id', 'Session')}${text('profile_id', 'Profile')}
${text('created_after', 'Created after (UTC)', 'datetime-local')}${text('created_before', 'Created before (UTC)', 'datetime-local')}
<button type="submit">Filter</button></form>`;
}

/** The runs page: newest first, one row a run, the API's cursor as the next page's link. */
export function renderRunsPage(options: {
  viewer: PageViewer;
  runs: readonly RunView[];
  filters: RunListFilters;
  nextCursor: string | null;
  /** Why no list could be had (the list route answered an error), shown instead of it. */
  problem?: string;
}): string {
  const { runs, filters } = options;
  const rows = runs.map(
    (run) => html`<tr class="run" data-run-id="${run.id}">
<td><a href="/runs/${run.id}">${run.id}</a></td>
<td><span class="status status-${run.status}">${run.status}</span></td>
<td>${formatTime(run.created_at_ms)}</td><td>${run.session_id}</td><td>${run.browser_profile_id ?? '—'}</td>
<td>${run.usage.steps}</td></tr>`,
  );
  const next = new URLSearchParams(
    Object.entries({ ...filters, cursor: options.nextCursor ?? '' }).filter(([, value]) => value),
  );
  return pageLayout(
    'Runs',
    html`<h1>Runs</h1>${filterForm(filters)}
${options.problem ? html`<p class="error" role="alert">${options.problem}</p>` : ''}
${
  runs.length > 0
    ? html`<table class="runs"><thead><tr><th>Run</th><th>Status</th><th>Created</th><th>Session</th><th>Profile</th><th>Steps</th></tr></thead>
<tbody>${rows}</tbody></table>`
    : options.problem
      ? ''
      : html`<p class="empty">No runs match.</p>`
}
${options.nextCursor ? html`<p><a class="next" href="/runs?${next.toString()}">Next page</a></p>` : ''}`,
    options.viewer,
  );
}
