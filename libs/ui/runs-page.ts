import { inputText, RUN_STATUSES, type RunView } from '../contracts/index.js';
import { formatDuration, formatTime, type Html, html, type PageViewer, pageLayout } from './html.js';

/** The runs list's filters, as the runs page's form names them and `GET /v1/runs` reads them. */
export const RUN_LIST_FILTERS = [
  'search',
  'status',
  'session_id',
  'profile_id',
  'created_after',
  'created_before',
] as const;
/** The filters set, each as text; `status` is one or several statuses, comma-separated. */
export type RunListFilters = Partial<Record<(typeof RUN_LIST_FILTERS)[number] | 'cursor' | 'limit', string>>;

/** The longest task shown in a row; the run page has the whole input. */
const TASK_SHOWN_CHARS = 140;

/**
 * The page's query of `filters`: only those set, each status as its own `status` (as the form's
 * boxes send them), so a link or a bookmark carries no empty field.
 */
export function runListParams(filters: RunListFilters): URLSearchParams {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filters)) {
    if (!value) continue;
    if (name === 'status') for (const status of value.split(',')) params.append(name, status);
    else params.set(name, value);
  }
  return params;
}

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
  const chosen = new Set((filters.status ?? '').split(','));
  return html`<form method="get" action="/runs" class="filters">
<label class="search">Search <input type="search" name="search" value="${filters.search ?? ''}" placeholder="Run id or task text" maxlength="200"></label>
<fieldset class="statuses"><legend>Status</legend>${RUN_STATUSES.map(
    (status) =>
      html`<label><input type="checkbox" name="status" value="${status}"${chosen.has(status) ? html` checked` : ''}> ${status}</label>`,
  )}</fieldset>
<details class="more-filters"${filters.session_id || filters.profile_id || filters.created_after || filters.created_before ? html` open` : ''}><summary>More filters</summary>
${text('session_id', 'Session')}${text('profile_id', 'Profile')}
${text('created_after', 'Created after (UTC)', 'datetime-local')}${text('created_before', 'Created before (UTC)', 'datetime-local')}</details>
${filters.limit ? html`<input type="hidden" name="limit" value="${filters.limit}">` : ''}
<button type="submit">Filter</button>${
    Object.keys(filters).some((name) => name !== 'limit')
      ? html` <a class="clear" href="/runs${filters.limit ? `?limit=${filters.limit}` : ''}">Clear</a>`
      : ''
  }
<p class="hint">Search looks at the newest 10,000 runs. Keys: <kbd>j</kbd>/<kbd>k</kbd> move, <kbd>Enter</kbd> opens.</p></form>`;
}

/** What the run was asked to do: its input's first line, cut to a row's room. */
export function runTask(run: RunView): string {
  const first = inputText(run.input).trim().split('\n')[0]?.trim() ?? '';
  return first.length > TASK_SHOWN_CHARS ? `${first.slice(0, TASK_SHOWN_CHARS - 1)}…` : first;
}

/** How long the run took; a run not yet ended, how long it has been going, marked so. */
function runDuration(run: RunView, nowMs: number): string {
  if (run.ended_at_ms !== null) return formatDuration(run.ended_at_ms - run.created_at_ms);
  return `${formatDuration(Math.max(0, nowMs - run.created_at_ms))} so far`;
}

function runRow(run: RunView, nowMs: number): Html {
  const task = runTask(run);
  return html`<tr class="run" data-run-id="${run.id}">
<td class="task" data-label="Task"><a href="/runs/${run.id}">${task || html`<i>no text</i>`}</a>
<span class="run-meta"><code>${run.id}</code> · ${formatTime(run.created_at_ms)}</span></td>
<td data-label="Status"><span class="status status-${run.status}">${run.status}</span>${
    run.error ? html` <code class="error-code">${run.error.code}</code>` : ''
  }</td>
<td data-label="Duration">${runDuration(run, nowMs)}</td>
<td data-label="Started by" class="principal">${run.principal}</td>
<td data-label="Steps">${run.usage.steps}</td>
<td data-label="Cost">$${(run.usage.cost_micro_usd / 1e6).toFixed(4)}</td></tr>`;
}

/**
 * The runs page: newest first, one row a run, the API's cursor as the next page's link. The list
 * (`#runs-list`) is what the page's script swaps in anew when the tenant's event stream says a run
 * came or changed.
 */
export function renderRunsPage(options: {
  viewer: PageViewer;
  runs: readonly RunView[];
  filters: RunListFilters;
  nextCursor: string | null;
  /** Why no list could be had (the list route answered an error), shown instead of it. */
  problem?: string;
  /** Now, epoch ms: how long a run still going has been. */
  nowMs?: number;
}): string {
  const { runs, filters } = options;
  const nowMs = options.nowMs ?? Date.now();
  const { cursor: _cursor, ...kept } = filters;
  const next = runListParams({ ...kept, ...(options.nextCursor ? { cursor: options.nextCursor } : {}) });
  const first = runListParams(kept).toString();
  return pageLayout(
    'Runs',
    html`<h1>Runs</h1>${filterForm(filters)}
${options.problem ? html`<p class="error" role="alert">${options.problem}</p>` : ''}
<section id="runs-list" data-live="yes">${
      runs.length > 0
        ? html`<table class="runs"><thead><tr><th>Task</th><th>Status</th><th>Duration</th><th>Started by</th><th>Steps</th><th>Cost</th></tr></thead>
<tbody>${runs.map((run) => runRow(run, nowMs))}</tbody></table>`
        : options.problem
          ? ''
          : html`<p class="empty">No runs match.</p>`
    }
<nav class="pages">${filters.cursor ? html`<a class="first" href="/runs${first ? `?${first}` : ''}">Newest</a> ` : ''}${
      options.nextCursor ? html`<a class="next" href="/runs?${next.toString()}">Next page</a>` : ''
    }</nav></section>`,
    options.viewer,
  );
}
