import type { RunFile } from '../contracts/index.js';
import { type Html, html } from './html.js';

/** Where the API serves one of a run's downloads (an attachment, behind the tenant check). */
export function runFileUrl(runId: string, fileId: string): string {
  return `/v1/runs/${encodeURIComponent(runId)}/files/${encodeURIComponent(fileId)}`;
}

/** Why a download was not kept, as the person reading the run page needs it. */
const CANCELLED_BECAUSE: Record<NonNullable<RunFile['reason']>, string> = {
  too_large: 'cancelled: larger than the per-file limit',
  run_limit: "cancelled: past what the run's downloads may keep",
  failed: 'the download did not complete',
  store_error: 'the artifact store refused it',
};

function sizeText(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  if (bytes < 1024 * 1024) return `${(bytes / 1024).toFixed(1)} KiB`;
  return `${(bytes / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * A run's downloads on its page: each kept file as a link (served as an attachment, never shown
 * inline) with its type, size and SHA-256; each cancelled one with why. Nothing when there are none.
 */
export function filesSection(runId: string, files: readonly RunFile[]): Html | '' {
  if (files.length === 0) return '';
  return html`<section id="files"><h2>Files</h2><ul class="files">${files.map((file) =>
    file.state === 'stored'
      ? html`<li><a href="${runFileUrl(runId, file.id)}" download="${file.name}">${file.name}</a> <span class="muted">${file.content_type}, ${sizeText(file.size_bytes)}</span> <code title="SHA-256">${file.sha256 ?? ''}</code></li>`
      : html`<li>${file.name} <span class="error">${CANCELLED_BECAUSE[file.reason ?? 'failed']}</span></li>`,
  )}</ul></section>`;
}
