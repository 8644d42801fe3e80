import type { PageLog, RunStep, RunView } from '../contracts/index.js';
import { formatDuration, formatTime, type Html, html } from './html.js';
import { artifactUrl, screenshotOf } from './screenshots.js';

type ToolStep = NonNullable<RunStep['tool']>;

/** A postcondition's result as a person reads it. */
const POSTCONDITION_SAYS: Record<NonNullable<ToolStep['postcondition']>['result'], string> = {
  satisfied: 'met',
  ambiguous: 'ambiguous (more than one element matched)',
  not_observed: 'not met',
};

function plural(count: number, one: string): string {
  return `${count} ${one}${count === 1 ? '' : 's'}`;
}

/** An act as the person reads it: the action on the element by role and name. */
function actLine(tool: ToolStep): Html {
  const args = (tool.arguments ?? {}) as Record<string, unknown>;
  const action = typeof args.action === 'string' ? args.action : 'act';
  const element = tool.target
    ? html`${tool.target.role} “${tool.target.name}”`
    : html`element <code>${String(args.element ?? '?')}</code>`;
  return html`<p class="act-target">${action} on <span class="element">${element}</span></p>`;
}

function postconditionLine(tool: ToolStep): Html | '' {
  const condition = tool.postcondition;
  if (!condition) return '';
  return html`<p class="postcondition postcondition-${condition.result}">Postcondition ${POSTCONDITION_SAYS[condition.result]} after ${plural(condition.observations, 'observation')} (${formatDuration(condition.elapsed_ms)})</p>`;
}

/**
 * What the page reported while the call ran: console errors and failed requests as the browser
 * worker kept them (bounded, query-free, secrets struck). Open when there is something to read.
 */
function pageLogPanel(log: PageLog | null): Html | '' {
  if (!log) return '';
  const errors = log.console_errors.length + log.console_errors_dropped;
  const failed = log.failed_requests.length + log.failed_requests_dropped;
  if (errors + failed === 0) return '';
  const more = (dropped: number) =>
    dropped > 0 ? html`<li class="more">and ${dropped} more, not kept</li>` : '';
  return html`<details class="page-log" open><summary>${plural(errors, 'console error')}, ${plural(failed, 'failed request')}</summary>
${
  errors > 0
    ? html`<ul class="console-errors">${log.console_errors.map(
        (error) =>
          html`<li><code class="console-error">${error.text}</code>${error.url ? html` <span class="source">${error.url}</span>` : ''}</li>`,
      )}${more(log.console_errors_dropped)}</ul>`
    : ''
}
${
  failed > 0
    ? html`<ul class="failed-requests">${log.failed_requests.map(
        (request) =>
          html`<li class="failed-request"><b>${request.status ?? request.failure ?? 'failed'}</b> ${request.method} <code>${request.url}</code></li>`,
      )}${more(log.failed_requests_dropped)}</ul>`
    : ''
}</details>`;
}

function stepRow(runId: string, step: RunStep): Html {
  const tool = step.tool;
  const model = step.model;
  const outcome = tool?.outcome
    ? tool.outcome.ok
      ? 'ok'
      : `${tool.outcome.code}: ${tool.outcome.message ?? ''}`
    : step.status;
  return html`<li class="step step-${step.kind}" data-step-id="${step.id}">
<div class="step-head"><span class="kind">${step.kind}</span> <b>${tool?.name ?? 'model turn'}</b>
<span class="outcome">${outcome}</span> <span class="duration">${formatDuration(step.duration_ms)}</span></div>
${
  model
    ? html`<p>${model.input_tokens} in / ${model.output_tokens} out tokens, $${(model.cost_micro_usd / 1e6).toFixed(4)}; asked for ${
        model.tool_calls.map((call) => call.name).join(', ') ||
        (model.answered ? 'nothing: answered' : 'nothing')
      }</p>`
    : ''
}
${tool?.name === 'browser.act' ? actLine(tool) : ''}
${tool ? html`<details class="arguments"><summary>Arguments</summary><pre class="arguments">${JSON.stringify(tool.arguments)}</pre></details>` : ''}
${tool?.settle ? html`<p class="settle">Settled: ${tool.settle.result === 'dom_quiet' ? 'page quiet' : 'bound reached'} after ${formatDuration(tool.settle.elapsed_ms)}</p>` : ''}
${tool ? postconditionLine(tool) : ''}
${tool?.page ? html`<p class="page">${tool.page.title} <code>${tool.page.url}</code></p>` : ''}
${tool ? pageLogPanel(tool.page_log) : ''}
${
  tool?.screenshot
    ? screenshotOf(
        runId,
        tool.screenshot,
        tool.screenshot_status,
        (src) =>
          html`<a href="${src}"><img class="thumb" src="${src}" alt="The page after ${tool.name}"></a>`,
      )
    : ''
}</li>`;
}

/**
 * Why an attempt ended, as far as the page knows: the run's own error for its latest attempt; for
 * an earlier one (a retry followed it), the failure of its last step that failed.
 */
function attemptError(run: RunView, attempt: number, steps: readonly RunStep[]): Html | '' {
  if (attempt === run.attempt)
    return run.error ? html`<p class="attempt-error error">${run.error.code}: ${run.error.message}</p>` : '';
  const failed = [...steps].reverse().find((step) => step.tool?.outcome && !step.tool.outcome.ok);
  const outcome = failed?.tool?.outcome;
  return outcome
    ? html`<p class="attempt-error error">Failed at ${failed.tool?.name}: ${outcome.code}: ${outcome.message ?? ''}</p>`
    : html`<p class="attempt-error error">Ended without success; a retry followed.</p>`;
}

/**
 * The run's steps, one section per attempt (a retry starts a new attempt, clean): each with its
 * start, its end and why it ended, then its steps in order.
 */
export function attemptSections(run: RunView, steps: readonly RunStep[]): Html {
  const attempts = new Map<number, RunStep[]>();
  for (const step of steps) attempts.set(step.attempt, [...(attempts.get(step.attempt) ?? []), step]);
  return html`${[...attempts.entries()]
    .sort(([a], [b]) => a - b)
    .map(([attempt, own]) => {
      const startedAtMs = Math.min(...own.map((step) => step.started_at_ms));
      const ends = own.map((step) => step.ended_at_ms ?? 0);
      const endedAtMs = attempt === run.attempt ? run.ended_at_ms : Math.max(...ends);
      return html`<section class="attempt" data-attempt="${attempt}"><h3>Attempt ${attempt}</h3>
<p class="attempt-times">Started ${formatTime(startedAtMs)} · ended ${endedAtMs ? formatTime(endedAtMs) : 'not yet'}</p>
${attemptError(run, attempt, own)}
<ol class="steps">${own.map((step) => stepRow(run.id, step))}</ol></section>`;
    })}`;
}

/**
 * The steps' stored screenshots in order, to play through: a slider, Play, and the frame with the
 * step it shows. The frames are listed in the markup; the page's script plays them (no inline
 * script under the page's policy).
 */
export function screenshotScrubber(run: RunView, steps: readonly RunStep[]): Html | '' {
  const frames = steps.filter(
    (step) => step.tool?.screenshot && (step.tool.screenshot_status?.state ?? 'stored') === 'stored',
  );
  const first = frames[0]?.tool?.screenshot;
  if (!first) return '';
  const label = (step: RunStep) => `Attempt ${step.attempt}, ${step.tool?.name} (${step.id})`;
  return html`<section id="scrubber"><h2>Screenshots</h2>
<div class="scrub-controls"><button type="button" class="scrub-play">Play</button>
<input type="range" class="scrub-range" min="0" max="${frames.length - 1}" value="0" aria-label="Screenshot">
<span class="scrub-label">${label(frames[0] as RunStep)}</span> <span class="scrub-count">1 of ${frames.length}</span></div>
<img class="scrub-frame" src="${artifactUrl(run.id, first)}" alt="The page at the chosen step">
<ol class="scrub-frames" hidden>${frames.map(
    (step) =>
      html`<li data-src="${artifactUrl(run.id, step.tool?.screenshot ?? '')}" data-label="${label(step)}"></li>`,
  )}</ol></section>`;
}
