/**
 * The runs page's part of the pages' script (no build step: the browser's own JavaScript):
 * - the list stays current: it listens to the tenant's event stream (`/v1/events`, the session
 *   cookie) and, on `ready` and on each run's status event, fetches the page anew and swaps in its
 *   list, so a new run or a changed status shows without a reload, under the page's own filters;
 * - j / k move through the rows, Enter opens the one marked (not while typing in a field).
 */
export const RUNS_LIST_SCRIPT = `
(() => {
  const list = document.getElementById('runs-list');
  if (!list) return;
  const RUN_EVENTS = ['ready', 'run.submitted', 'run.claimed', 'run.resumed', 'run.parked', 'run.waiting',
    'run.requeued', 'run.succeeded', 'run.failed', 'run.cancelled', 'run.cancel_requested', 'run.retried'];
  let marked;

  function rows() { return [...document.querySelectorAll('#runs-list tr.run')]; }
  function mark(row) {
    for (const other of rows()) { other.classList.remove('current'); other.removeAttribute('aria-current'); }
    marked = row?.dataset.runId;
    if (!row) return;
    row.classList.add('current');
    row.setAttribute('aria-current', 'true');
    row.scrollIntoView({ block: 'nearest' });
  }

  let refreshing = false;
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
        const next = doc.getElementById('runs-list');
        const current = document.getElementById('runs-list');
        if (!next || !current) return;
        current.replaceWith(document.adoptNode(next));
        const row = rows().find((candidate) => candidate.dataset.runId === marked);
        if (row) mark(row);
      } while (again);
    } finally {
      refreshing = false;
    }
  }

  document.addEventListener('keydown', (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey) return;
    if (event.target instanceof Element && event.target.closest('input, select, textarea, button, summary')) return;
    const all = rows();
    const at = all.findIndex((row) => row.dataset.runId === marked);
    if (event.key === 'j' || event.key === 'k') {
      event.preventDefault();
      const to = at === -1 ? 0 : Math.min(all.length - 1, Math.max(0, at + (event.key === 'j' ? 1 : -1)));
      mark(all[to]);
    } else if (event.key === 'Enter' && at !== -1) {
      const link = all[at].querySelector('a');
      if (link) { event.preventDefault(); location.href = link.href; }
    }
  });

  // A stream the API answered with an error (a 503 while Redis is away) is never reopened by the
  // browser: it is opened again here, and the list read anew for what it missed.
  function listen() {
    const source = new EventSource('/v1/events');
    for (const type of RUN_EVENTS) source.addEventListener(type, () => void refresh());
    source.addEventListener('error', () => {
      if (source.readyState !== EventSource.CLOSED) return;
      setTimeout(() => { listen(); void refresh(); }, 2000);
    });
  }
  if (list.dataset.live === 'yes' && typeof EventSource === 'function') listen();
})();
`;
