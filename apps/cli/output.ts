import type {
  ApiKey,
  Approval,
  PersonControl,
  Profile,
  Run,
  RunDetail,
  RunFile,
  Schedule,
  UploadedFile,
} from './api.js';

/**
 * Where a command writes: `line` to stdout, `problem` to stderr. With `json`, a command writes the
 * API's JSON (one document; `runs watch` one object a line) and nothing else to stdout.
 */
export interface Output {
  json: boolean;
  line(text: string): void;
  problem(text: string): void;
}

export function streamOutput(
  json: boolean,
  stdout: { write(text: string): unknown },
  stderr: { write(text: string): unknown },
): Output {
  return {
    json,
    line: (text) => void stdout.write(`${text}\n`),
    problem: (text) => void stderr.write(`${text}\n`),
  };
}

/** One JSON document on one line, so `--json` output parses line by line as well as whole. */
export function jsonLine(value: unknown): string {
  return JSON.stringify(value);
}

const isoTime = (ms: number) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');

function usd(microUsd: number): string {
  return (microUsd / 1_000_000).toFixed(2);
}

/** Usage against limits, one line: `steps 3/160 · model calls 2/120 · tool calls 3/160 · USD 0.00/30`. */
export function progressLine(run: Pick<Run, 'usage' | 'limits'>): string {
  const { usage, limits } = run;
  const cost = `USD ${usd(usage.cost_micro_usd)}/${limits.max_cost_usd ?? 'no limit'}`;
  return [
    `steps ${usage.steps}/${limits.max_steps}`,
    `model calls ${usage.model_calls}/${limits.max_model_calls}`,
    `tool calls ${usage.tool_calls}/${limits.max_tool_calls}`,
    cost,
  ].join(' · ');
}

/** A run's end as a line: its answer, or its error code, message and step. */
export function endLine(run: Run): string {
  if (run.status === 'succeeded') {
    const answer = (run.result as { answer?: unknown } | null)?.answer;
    return `run ${run.id} succeeded${typeof answer === 'string' ? `: ${answer}` : ''}`;
  }
  const step = run.error?.step != null ? ` at step ${run.error.step}` : '';
  // A cancelled run's error code is `cancelled`: the status says it once.
  const code = run.error && run.error.code !== run.status ? ` ${run.error.code}` : '';
  return `run ${run.id} ${run.status}${code}${step}`;
}

export function runSummaryLine(run: Run): string {
  const code = run.error ? ` ${run.error.code}` : '';
  const waiting = run.waiting_for ? ` (waiting for ${run.waiting_for})` : '';
  return `${run.id}  ${run.status}${code}${waiting}  attempt ${run.attempt}  profile ${run.browser_profile_id ?? '-'}  ${isoTime(run.created_at_ms)}`;
}

export function runDetailLines(run: RunDetail): string[] {
  const lines = [
    runSummaryLine(run),
    `  session ${run.session_id}  deadline ${isoTime(run.deadline_at_ms)}`,
    `  ${progressLine(run)}`,
  ];
  for (const approval of run.pending_approvals) lines.push(`  waits on ${approvalLine(approval)}`);
  if (run.ended_at_ms !== null) lines.push(`  ${endLine(run)}`);
  // The value a program reads (`result.output`), as one line of JSON.
  const output = (run.result as { output?: unknown } | null)?.output;
  if (output !== undefined) lines.push(`  output ${JSON.stringify(output)}`);
  if (run.error) lines.push(`  ${run.error.message}`);
  return lines;
}

/** What an approval would let happen: the card's action and element, else the tool. */
export function approvalLine(approval: Approval): string {
  const card = approval.card;
  const what =
    card?.element && card.action
      ? `${card.action} ${card.element.role} "${card.element.name}"${card.page_url ? ` on ${card.page_url}` : ''}`
      : approval.tool;
  return `${approval.id}  ${approval.status}  run ${approval.run_id}  ${what}`;
}

export function profileLine(profile: Profile): string {
  return `${profile.id}  ${profile.allowed_origins.join(' ')}${profile.protected ? '  protected' : ''}${profile.sealed ? '  sealed' : ''}`;
}

export function keyLine(key: ApiKey): string {
  return `${key.key_id}  ${key.principal}  ${key.scopes.join(',')}  ${isoTime(key.created_at_ms)}`;
}

/** A schedule: its timing, state, next due time and what its fires came to. */
export function scheduleLine(schedule: Schedule): string {
  const timing =
    schedule.cron !== null ? `cron "${schedule.cron}" ${schedule.timezone}` : `every ${schedule.every_ms} ms`;
  const state = schedule.paused
    ? `paused (${schedule.paused_reason})`
    : `next ${isoTime(schedule.next_due_at_ms[0] ?? 0)}`;
  const counts = Object.entries(schedule.counts)
    .filter(([, count]) => count > 0)
    .map(([outcome, count]) => `${outcome} ${count}`)
    .join(', ');
  return `${schedule.id}  ${timing}  overlap ${schedule.overlap}  ${state}  session ${schedule.run.session_id}${counts ? `  ${counts}` : ''}`;
}

/** A takeover as one line: its state, who holds the page, until when or what was done. */
export function personControlLine(control: PersonControl): string {
  const until = control.until_ms !== null ? ` until ${new Date(control.until_ms).toISOString()}` : '';
  const inputs = control.inputs !== null ? ` after ${control.inputs} inputs` : '';
  const url = control.url !== null ? ` at ${control.url}` : '';
  return `${control.run_id} ${control.state} by ${control.holder}${until}${inputs}${url}`;
}

/** An uploaded file: its id first (what a run's `files` names), then what was kept and until when. */
export function uploadedFileLine(file: UploadedFile): string {
  const until =
    file.expires_at_ms === null ? 'kept while a run lists it' : `expires ${isoTime(file.expires_at_ms)}`;
  return `${file.id}  ${file.name}  ${file.content_type}  ${file.size_bytes} B  sha256 ${file.sha256}  ${until}`;
}

/** A run's download: stored with its SHA-256, or cancelled and why. */
export function runFileLine(file: RunFile): string {
  const kept = file.state === 'stored' ? `sha256 ${file.sha256}` : `cancelled (${file.reason})`;
  return `${file.id}  ${file.name}  ${file.content_type}  ${file.size_bytes} B  ${kept}`;
}
