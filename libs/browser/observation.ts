import { randomBytes } from 'node:crypto';
import type {
  BrowserObservation,
  ConditionResult,
  ObservationWindow,
  PageLog,
  Predicate,
  SettleResult,
} from '../contracts/index.js';
import type { PageAgentWorld } from './agent-call.js';
import { BrowserToolError, CaptureTimedOutError, isNavigationTeardown } from './errors.js';
import { evidenceKey } from './evidence-key.js';
import { frameWorldsOf } from './frame-worlds.js';
import { type Operation, sleepMs, within } from './operation.js';
import type { Capture, CaptureRequest } from './page-script/page-agent.js';
import { matchPredicate, nextPollAtMs, POLL_INTERVAL_MS } from './predicate.js';

/** ADR-0130 d8: up to 4,096 candidates are checked, the first 256 visible ones kept. */
export const CANDIDATE_LIMIT = 4_096;
export const WINDOW_SIZE = 256;
/** Bounds that keep one observation small enough for a model's context. */
export const TEXT_LIMIT_CHARS = 4_000;
export const NAME_LIMIT_CHARS = 200;
/** How long a capture cut off by the deadline is given to finish before it is abandoned. */
export const CAPTURE_JOIN_GRACE_MS = 250;

/** What every tool gives the platform: the model-facing observation and, beside it, the evidence key. */
export interface ToolOutcome {
  observation: BrowserObservation;
  /** ADR-0130 d7: for the platform's loop breaker only; never shown to the model or stored. */
  evidenceKey: string;
  /** What the pages reported while a navigate or act ran (see PageLogRecorder); never the model's. */
  pageLog?: PageLog;
}

/** The revision whose references the page still holds; null once a capture was cut off. */
export interface RevisionState {
  current: string | null;
}

function newRevision(): string {
  return randomBytes(9).toString('base64url');
}

/** `continuation` is opaque to the model: the revision it continues and the window's next offset. */
export function continuationToken(revision: string, offset: number): string {
  return `${revision}.${offset}`;
}

export function parseContinuation(token: string): { revision: string; offset: number } | null {
  const match = /^([A-Za-z0-9_-]{1,64})\.(\d{1,6})$/.exec(token);
  if (!match?.[1] || !match[2]) return null;
  return { revision: match[1], offset: Number(match[2]) };
}

/**
 * One observation in one browser round trip. A capture cut off by the deadline or the signal is
 * cancelled and joined, and every reference before it is void (ADR-0159): the call fails
 * `page_changed` and so does an act on any earlier revision.
 */
export async function captureObservation(
  agent: PageAgentWorld,
  revisions: RevisionState,
  op: Operation,
  options: { offset: number; settle: SettleResult | null },
): Promise<ToolOutcome> {
  // Until this capture completes no earlier reference may be trusted.
  revisions.current = null;
  for (;;) {
    op.throwIfEnded('the observation');
    const request: CaptureRequest = {
      revision: newRevision(),
      offset: options.offset,
      windowSize: WINDOW_SIZE,
      candidateLimit: CANDIDATE_LIMIT,
      textLimit: TEXT_LIMIT_CHARS,
      nameLimit: NAME_LIMIT_CHARS,
    };
    // Frames of other origins are captured in their own worlds and inlined.
    const work = frameWorldsOf(agent).capture(request);
    let finished: Awaited<ReturnType<typeof within<Capture>>>;
    try {
      finished = await within(work, op.deadlineMs, op.signal);
    } catch (error) {
      // The document went away mid-capture: read the one that replaced it.
      if (isNavigationTeardown(error)) continue;
      throw new BrowserToolError('page_changed', 'the page could not be observed', false, { cause: error });
    }
    if (!finished.done) {
      await joinCutOffCapture(agent, work);
      if (!op.signal?.aborted)
        throw new CaptureTimedOutError(
          "the capture timed out: it did not complete before the call's deadline; earlier references are void",
        );
      throw new BrowserToolError(
        'page_changed',
        'the observation did not complete before the call ended; earlier references are void',
      );
    }
    revisions.current = request.revision;
    const observation = toObservation(finished.value, request.revision, options.settle);
    return { observation, evidenceKey: evidenceKey(observation) };
  }
}

async function joinCutOffCapture(agent: PageAgentWorld, work: Promise<Capture>): Promise<void> {
  await within(work, Date.now() + CAPTURE_JOIN_GRACE_MS);
  // Whatever the capture registered is forgotten page-side as well.
  await within(frameWorldsOf(agent).invalidate(), Date.now() + CAPTURE_JOIN_GRACE_MS).catch(() => undefined);
}

function toObservation(capture: Capture, revision: string, settle: SettleResult | null): BrowserObservation {
  const end = capture.offset + capture.elements.length;
  const window: ObservationWindow = {
    offset: capture.offset,
    count: capture.elements.length,
    visible_seen: capture.visibleSeen,
    candidates_checked: capture.candidatesChecked,
    candidate_limit_reached: capture.candidateLimitReached,
    continuation: end < capture.visibleSeen ? continuationToken(revision, end) : null,
  };
  return {
    url: capture.url,
    title: capture.title,
    text: capture.text,
    text_truncated: capture.textTruncated,
    revision,
    settle,
    elements: capture.elements,
    window,
    ...(capture.scroll ? { scroll: capture.scroll } : {}),
  };
}

/**
 * ADR-0159: reads until the predicate holds on the current window — the first read, then at most
 * 20 more, each at least 250 ms after the previous began, inside the predicate's wait and the
 * call's deadline. The last observation is returned with the condition result; an action is never
 * repeated here.
 */
export async function observeUntil(
  read: () => Promise<ToolOutcome>,
  predicate: Predicate,
  op: Operation,
): Promise<ToolOutcome> {
  const startedAtMs = Date.now();
  // No poll starts in the last interval before the caller's deadline: a read cut off there would
  // void the observation already held (ADR-0159) instead of returning it.
  const waitEndsAtMs = Math.min(startedAtMs + predicate.wait_ms, op.deadlineMs - POLL_INTERVAL_MS);
  let readStartMs = startedAtMs;
  let latest = await read();
  // The slowest read so far: a poll starts only with twice that left before the caller's
  // deadline, so a loaded machine ends the wait with the observation it holds, not a cut-off read.
  let slowestReadMs = Date.now() - readStartMs;
  let observations = 1;
  let result = matchPredicate(latest.observation.elements, predicate);
  while (result !== 'satisfied') {
    const nextAtMs = nextPollAtMs(readStartMs, observations - 1, waitEndsAtMs);
    if (nextAtMs === null) break;
    await sleepMs(nextAtMs - Date.now(), op.signal);
    if (op.ended() || op.deadlineMs - Date.now() < 2 * slowestReadMs) break;
    readStartMs = Date.now();
    latest = await read();
    slowestReadMs = Math.max(slowestReadMs, Date.now() - readStartMs);
    observations += 1;
    result = matchPredicate(latest.observation.elements, predicate);
  }
  const condition: ConditionResult = {
    result,
    scope: 'observation_window',
    observations,
    elapsed_ms: Math.max(0, Math.round(Date.now() - startedAtMs)),
  };
  return { observation: { ...latest.observation, condition }, evidenceKey: latest.evidenceKey };
}
