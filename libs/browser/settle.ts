import type { Page } from 'playwright-core';
import type { SettleResult } from '../contracts/index.js';
import { literal, type PageAgentWorld } from './agent-call.js';
import { isNavigationTeardown } from './errors.js';
import { type Operation, sleepMs, within } from './operation.js';
import type { RequestSnapshot, RequestTracker } from './request-tracker.js';

/** ADR-0130 d5: every settle ends within 2 s. */
export const SETTLE_BOUND_MS = 2_000;
/** ADR-0130 d5: the DOM is quiet after 300 ms without a mutation. */
export const DOM_QUIET_MS = 300;
/**
 * How long after a document's readiness (its `load`) its requests still join the readiness
 * snapshot. A request a page starts in its load handlers reaches the tracker some milliseconds
 * after the event, because the origin fence routes every request first; without the grace it
 * would miss the snapshot and settling would end before the page's data arrived.
 */
export const READINESS_GRACE_MS = 100;
/** Time kept back from the call's deadline for the observation that follows settling. */
export const CAPTURE_RESERVE_MS = 500;

/**
 * Settles the page after a navigation or a dispatched action (ADR-0159): document readiness — the
 * document's `load` (`readyState` complete), so content a page builds in its load handlers is
 * there — then the application requests in flight at entry and at readiness (at most 256; later
 * ones never join), then 300 ms of DOM quiet, all inside 2 s and the call's deadline. A main-frame navigation that commits meanwhile
 * moves the DOM-quiet watch into the new document. Never throws: a page that does not settle in
 * time is reported `bound_expired` and observed as it is.
 */
export async function settlePage(
  page: Page,
  agent: PageAgentWorld,
  tracker: RequestTracker,
  op: Operation,
): Promise<SettleResult> {
  const startedAtMs = Date.now();
  // A short call deadline cuts settling first, keeping time to observe what the page then shows.
  const boundAtMs = Math.min(startedAtMs + SETTLE_BOUND_MS, op.deadlineMs - CAPTURE_RESERVE_MS);
  const snapshot = tracker.snapshot();
  const outcome = (result: SettleResult['result']): SettleResult => ({
    result,
    elapsed_ms: Math.max(0, Math.round(Date.now() - startedAtMs)),
  });
  try {
    // The browser's events usually tell it already; asking the page costs a round trip.
    const readyAtEntry = tracker.loadedNow || (await readyNow(agent, boundAtMs, op));
    if (!(await documentReady(page, boundAtMs, op))) return outcome('bound_expired');
    if (!readyAtEntry) await readinessGrace(boundAtMs, op);
    // The requests of a document that was not there at entry join once, at its readiness; polling
    // started later never does (ADR-0159).
    let documentsSeen = tracker.documents;
    tracker.extend(snapshot);
    if (!(await drained(tracker, snapshot, boundAtMs, op))) return outcome('bound_expired');
    for (;;) {
      if (!(await navigationCommitted(tracker, boundAtMs, op))) return outcome('bound_expired');
      if (!(await documentReady(page, boundAtMs, op))) return outcome('bound_expired');
      if (tracker.documents !== documentsSeen) {
        // A document committed since: its own requests at readiness join, once.
        await readinessGrace(boundAtMs, op);
        documentsSeen = tracker.documents;
        tracker.extend(snapshot);
        if (!(await drained(tracker, snapshot, boundAtMs, op))) return outcome('bound_expired');
        continue;
      }
      const documentsBefore = tracker.documents;
      const watchMs = boundAtMs - Date.now();
      if (watchMs <= 0 || op.signal?.aborted) return outcome('bound_expired');
      let quiet: boolean;
      try {
        const watched = await within(
          agent.call<boolean>(`waitQuiet(${DOM_QUIET_MS}, ${literal(watchMs)})`),
          // The page-side watch ends itself at the bound; this margin only covers the round trip.
          boundAtMs + 250,
          op.signal,
        );
        if (!watched.done) return outcome('bound_expired');
        quiet = watched.value;
      } catch (error) {
        if (isNavigationTeardown(error)) continue;
        return outcome('bound_expired');
      }
      // A watch that ran in an outgoing document saw nothing of the new one: watch again there.
      if (tracker.documents !== documentsBefore || tracker.navigationPending) continue;
      return outcome(quiet ? 'dom_quiet' : 'bound_expired');
    }
  } catch {
    return outcome('bound_expired');
  }
}

/** Whether the current document had loaded already (`readyState` complete); false when that is unknown. */
async function readyNow(agent: PageAgentWorld, boundAtMs: number, op: Operation): Promise<boolean> {
  const state = await within(agent.call<DocumentReadyState>('readyState()'), boundAtMs, op.signal).catch(
    () => ({ done: false as const }),
  );
  return state.done && state.value === 'complete';
}

async function readinessGrace(boundAtMs: number, op: Operation): Promise<void> {
  await sleepMs(Math.min(READINESS_GRACE_MS, boundAtMs - Date.now()), op.signal);
}

/** Waits for the snapshot to empty; false when the bound ends first or the snapshot overflowed. */
async function drained(
  tracker: RequestTracker,
  snapshot: RequestSnapshot,
  boundAtMs: number,
  op: Operation,
): Promise<boolean> {
  while (!tracker.drained(snapshot)) {
    const change = tracker.nextChange();
    const waited = await within(change.promise, boundAtMs, op.signal);
    change.cancel();
    if (!waited.done) return false;
  }
  if (snapshot.overflowed) {
    // More requests than the snapshot holds: no claim of settling can be made; wait out the bound.
    await waitOut(boundAtMs, op);
    return false;
  }
  return true;
}

async function documentReady(page: Page, boundAtMs: number, op: Operation): Promise<boolean> {
  const timeout = boundAtMs - Date.now();
  if (timeout <= 0 || op.signal?.aborted) return false;
  const ready = await within(
    page
      .mainFrame()
      .waitForLoadState('load', { timeout })
      .then(() => true),
    boundAtMs,
    op.signal,
  ).catch(() => ({ done: false as const }));
  return ready.done;
}

/** Waits while a main-frame document request is on its way; false when the bound ends first. */
async function navigationCommitted(
  tracker: RequestTracker,
  boundAtMs: number,
  op: Operation,
): Promise<boolean> {
  while (tracker.navigationPending) {
    const change = tracker.nextChange();
    const waited = await within(change.promise, boundAtMs, op.signal);
    change.cancel();
    if (!waited.done) return false;
  }
  return true;
}

async function waitOut(untilMs: number, op: Operation): Promise<void> {
  await within(new Promise<never>(() => undefined), untilMs, op.signal);
}
