import { setTimeout as sleep } from 'node:timers/promises';
import type { LeaseholdApi, Run } from './api.js';
import { ApiAnswerError, CliError, ConnectionError, EXIT_CODES, type ExitCode } from './errors.js';
import { endLine, jsonLine, type Output, progressLine } from './output.js';
import { readServerSentEvents } from './sse.js';

/**
 * Waits before each reconnection of a stream that broke without an answer (a restarting API, a
 * lost connection). Past the last, `runs watch` gives up with exit code 4. A stream that brought
 * events starts the count again.
 */
export const RECONNECT_DELAYS_MS = [250, 500, 1_000, 2_000, 4_000, 8_000] as const;

function exitCodeOf(run: Run): ExitCode {
  switch (run.status) {
    case 'succeeded':
      return EXIT_CODES.ok;
    case 'cancelled':
      return EXIT_CODES.cancelled;
    default:
      return EXIT_CODES.failed;
  }
}

/**
 * One event of the stream's `data:` (the API's RunEvent; the document declares the stream as text,
 * so its shape is written here).
 */
export interface RunEvent {
  id: string;
  type: string;
  at_ms: number;
  data: Record<string, unknown>;
}

/** One event as a short human line; null for events that only repeat what a step line says. */
function eventLine(event: RunEvent): string | null {
  const data = event.data;
  switch (event.type) {
    case 'step.started':
      return `step ${data.step_id} ${typeof data.tool === 'string' ? data.tool : 'model turn'}`;
    case 'step.ended':
      if (typeof data.code === 'string') return `step ${data.step_id} failed ${data.code}`;
      // A model turn that answered says nothing its tool calls will not say next.
      return typeof data.step_id === 'string' && /-m\d+$/.test(data.step_id)
        ? null
        : `step ${data.step_id} ok`;
    case 'approval.requested':
      return `approval ${data.approval_id} requested for ${data.tool}: leasehold approvals approve ${data.approval_id}`;
    case 'approval.approved':
    case 'approval.denied':
      return `approval ${data.approval_id} ${event.type.slice('approval.'.length)}`;
    case 'person.requested':
      return 'the agent asks for a person: take its page over on the run page, or with leasehold runs takeover';
    case 'person.taken_over':
      return `${data.holder} has the page`;
    case 'person.handed_back':
      return `${data.holder} handed the page back after ${data.inputs ?? 'some'} inputs`;
    case 'grant.used':
      return `grant ${data.grant_id} used ${data.used}/${data.max_actions}`;
    case 'run.waiting':
      return `run waiting for ${data.waiting_for ?? 'its turn'}${typeof data.holder_run_id === 'string' ? ` (behind ${data.holder_run_id})` : ''}`;
    // A step run again after its approval: its start was said, and its end will be.
    case 'step.resumed':
    // The run's end is said once, by the last line, with its answer or error.
    case 'run.succeeded':
    case 'run.failed':
    case 'run.cancelled':
    case 'tool.acquire_attempt':
    case 'message':
      return null;
    default:
      return `run ${event.type.slice('run.'.length)}`;
  }
}

/**
 * `runs watch`: prints the run's events as they arrive and a progress line (usage against limits)
 * after each step, until the run has ended; answers the exit code of its end. The stream is
 * resumed after a break from the last event seen (`Last-Event-ID`), so no event is printed twice.
 */
export async function watchRun(api: LeaseholdApi, runId: string, output: Output): Promise<ExitCode> {
  let lastEventId: string | undefined;
  let lastProgress = '';
  let breaks = 0;
  // A step's start is printed once, whatever the stream repeats (an API before steps said resumed).
  const started = new Set<string>();
  const showProgress = (run: Run) => {
    const line = progressLine(run);
    if (output.json || line === lastProgress) return;
    lastProgress = line;
    output.line(`  ${line}`);
  };

  for (;;) {
    let ended: Run | undefined;
    try {
      const response = await api.openEvents(runId, lastEventId);
      if (!response.body) throw new ConnectionError(api.root, new Error('the event stream has no body'));
      for await (const message of readServerSentEvents(response.body)) {
        breaks = 0;
        if (message.id) lastEventId = message.id;
        const event = JSON.parse(message.data) as RunEvent;
        if (output.json) output.line(jsonLine(event));
        else if (event.type !== 'step.started' || !started.has(String(event.data.step_id))) {
          if (event.type === 'step.started') started.add(String(event.data.step_id));
          const line = eventLine(event);
          if (line) output.line(line);
        }
        if (event.type === 'step.ended' && !output.json) showProgress(await api.getRun(runId));
      }
      // The API ends the stream after the run's end, or when it shuts down: the record decides.
      const run = await api.getRun(runId);
      if (run.ended_at_ms !== null) ended = run;
      else throw new StreamClosedEarly(api.root);
    } catch (error) {
      if (!streamBroke(error)) throw error;
      if (breaks >= RECONNECT_DELAYS_MS.length)
        throw error instanceof CliError ? error : new ConnectionError(api.root, error);
      await sleep(RECONNECT_DELAYS_MS[breaks] ?? 0);
      breaks += 1;
      continue;
    }
    if (ended) {
      showProgress(ended);
      return reportEnd(ended, output);
    }
  }
}

/** The API closed the stream before the run ended (it is shutting down): reconnect like a break. */
class StreamClosedEarly extends CliError {
  constructor(apiUrl: string) {
    super(
      'stream_closed',
      `${apiUrl} kept closing the event stream before the run ended`,
      EXIT_CODES.connection,
    );
  }
}

/** A break worth reconnecting after: no answer, a cut stream, or the API saying it is unavailable. */
function streamBroke(error: unknown): boolean {
  if (error instanceof ApiAnswerError) return error.status === 503 || error.status === 502;
  if (error instanceof ConnectionError || error instanceof StreamClosedEarly) return true;
  // undici's `TypeError: terminated` when the connection is cut mid-body.
  return error instanceof TypeError;
}

function reportEnd(run: Run, output: Output): ExitCode {
  if (!output.json) output.line(endLine(run));
  if (run.status !== 'succeeded')
    output.problem(`error ${run.error?.code ?? run.status}: ${run.error?.message ?? `run ${run.status}`}`);
  return exitCodeOf(run);
}
