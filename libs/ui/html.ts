/**
 * The run pages' HTML: plain server-rendered text, every value escaped on its way in,
 * the one script and the one stylesheet served as files, so the strict policy below holds: no
 * inline script or style, nothing from another origin, never inside another site's frame.
 */
export const PAGE_CSP = "default-src 'self'; img-src 'self'; script-src 'self'; frame-ancestors 'none'";

/** The page's headers: its policy, no sniffing, no caching of a page that shows a tenant's runs. */
export const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'content-security-policy': PAGE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
} as const;

/** Where the pages' script and stylesheet are served. */
export const PAGE_SCRIPT_PATH = '/ui/pages.js';
export const PAGE_STYLE_PATH = '/ui/pages.css';

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
};

/** Text made safe for an element's content or a quoted attribute. */
export function escapeHtml(value: unknown): string {
  return String(value ?? '').replace(/[&<>"']/g, (character) => ESCAPES[character] ?? character);
}

/**
 * A tagged template that escapes every value except {@link Html} made by another `html`
 * (or {@link raw}): one rule, so no page forgets to escape.
 */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

export function raw(text: string): Html {
  return new Html(text);
}

type HtmlValue = Html | string | number | boolean | null | undefined | readonly HtmlValue[];

function render(value: HtmlValue): string {
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map(render).join('');
  if (value === null || value === undefined || value === false) return '';
  return escapeHtml(value);
}

export function html(strings: TemplateStringsArray, ...values: HtmlValue[]): Html {
  return new Html(strings.reduce((out, part, index) => out + render(values[index - 1] ?? '') + part));
}

/** Who is signed in, shown in every page's header with the sign-out button. */
export interface PageViewer {
  tenant: string;
  principal: string;
  csrfToken: string;
}

/** A whole page: the header with the viewer and sign-out (itself a CSRF-carrying form), then `main`. */
export function pageLayout(title: string, main: Html, viewer?: PageViewer): string {
  const header = viewer
    ? html`<header><a href="/runs" class="brand">Leasehold</a>
<nav class="site"><a href="/runs">Runs</a> <a href="/approvals">Approvals</a></nav>
<span class="viewer">${viewer.principal} · tenant ${viewer.tenant}</span>
<form method="post" action="/signout" class="signout"><input type="hidden" name="csrf_token" value="${viewer.csrfToken}"><button type="submit">Sign out</button></form></header>`
    : html`<header><span class="brand">Leasehold</span></header>`;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>${title} · Leasehold</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="light dark">
${viewer ? html`<meta name="csrf-token" content="${viewer.csrfToken}">` : ''}
<link rel="stylesheet" href="${PAGE_STYLE_PATH}"><script src="${PAGE_SCRIPT_PATH}" defer></script></head>
<body>${header}<main>${main}</main></body></html>`.text;
}

/** An epoch-ms time as UTC, to the second. */
export function formatTime(epochMs: number | null | undefined): string {
  if (!epochMs) return '—';
  return new Date(epochMs)
    .toISOString()
    .replace('T', ' ')
    .replace(/\.\d+Z$/, ' UTC');
}

/** A duration in ms, as a person reads it. */
export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined) return '—';
  return ms < 1_000 ? `${ms} ms` : `${(ms / 1_000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}
