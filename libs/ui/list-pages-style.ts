/**
 * The runs list's and the approvals page's style, the narrow screen's and the dark scheme's, appended
 * to the pages' one stylesheet. The dark scheme follows the system's setting
 * (`prefers-color-scheme`); the pages say both schemes are theirs (`<meta name="color-scheme">`), so
 * the browser's own controls follow too. The colours a test reads are {@link DARK_SCHEME}'s.
 */

/** The dark scheme's page background and text. */
export const DARK_SCHEME = { background: '#14171f', text: '#e4e7ee' } as const;

export const LIST_PAGES_STYLE = `nav.site { display: flex; gap: .8rem; }
nav.site a { font-weight: 400; opacity: .9; }
a { color: #2f4d8a; }
.filters fieldset.statuses { display: flex; flex-wrap: wrap; gap: .2rem .8rem; border: 1px solid #ccd; border-radius: .4rem; margin: 0; }
.filters .search input { width: 18rem; max-width: 100%; }
.filters .more-filters { display: flex; flex-wrap: wrap; gap: .6rem; }
.filters .more-filters[open] { display: flex; }
.filters .hint { flex-basis: 100%; margin: 0; opacity: .75; font-size: .85em; }
kbd { border: 1px solid #ccd; border-radius: .2rem; padding: 0 .3rem; font-size: .85em; }
table.runs td.task a { font-weight: 600; }
.run-meta { display: block; font-size: .8em; opacity: .75; word-break: break-all; }
.error-code { font-size: .8em; color: #a32121; }
tr.run.current { outline: 2px solid #2f4d8a; outline-offset: -2px; background: #eef3fc; }
nav.pages { display: flex; gap: 1rem; margin: .8rem 0; }
ol.approvals-list { list-style: none; padding: 0; }
ol.approvals-list > li { margin: 1rem 0; }
.in-run { margin: 0 0 .2rem; }
.approval pre, .approval .page-url { white-space: pre-wrap; word-break: break-all; }
.approval .decide fieldset { flex-wrap: wrap; }
.approval input { max-width: 100%; }
@media (max-width: 40rem) {
  header { flex-wrap: wrap; gap: .4rem .8rem; padding: .5rem .8rem; }
  header .viewer { margin-left: 0; flex-basis: 100%; font-size: .85em; word-break: break-all; }
  main { padding: .6rem .8rem 2rem; }
  table.runs, table.runs tbody, table.runs tr, table.runs td { display: block; }
  table.runs thead { display: none; }
  table.runs { background: transparent; }
  table.runs tr.run { background: #fff; border-radius: .4rem; margin: .5rem 0; padding: .3rem 0; }
  table.runs td { border: 0; padding: .15rem .7rem; }
  table.runs td:not(.task)::before { content: attr(data-label) ": "; font-weight: 600; }
  .filters label, .filters .search input { width: 100%; }
  .filters input:not([type="checkbox"]) { max-width: 100%; box-sizing: border-box; }
}
@media (prefers-color-scheme: dark) {
  body { background: ${DARK_SCHEME.background}; color: ${DARK_SCHEME.text}; }
  header { background: #0b0d12; }
  a { color: #9dbbff; }
  table.runs, table.runs tr.run, .meter, .step { background: #1e222c; }
  table.runs th, table.runs td { border-bottom-color: #2c313d; }
  tr.run.current { background: #26314a; outline-color: #9dbbff; }
  .status { background: #353b49; color: ${DARK_SCHEME.text}; }
  .status-succeeded { background: #1f5132; } .status-failed, .status-cancelled { background: #6b2222; }
  .status-running { background: #23406e; } .status-parked { background: #6b5214; }
  .approval { background: #2a2414; border-color: #b8902f; }
  .person-request { background: #1b2436; border-color: #5d7cc0; }
  .error, .error-code { color: #ff9b9b; }
  .filters fieldset.statuses, kbd, .thumb, .approval-shot, #live-frame { border-color: #3a4050; }
  .shot-pending, .shot-failed { color: #a9b0c0; }
  .decision, .live-dialog { background: #1e222c; }
  .page-log { background: #2a1b1b; }
  .postcondition-satisfied { color: #7fd69b; }
  .postcondition-not_observed, .postcondition-ambiguous { color: #ff9b9b; }
}
`;
