import { EventEmitter } from 'node:events';
import type { Page, Request } from 'playwright-core';
import { describe, expect, it } from 'vitest';
import { evidenceKey, matchPredicate, normalizeOrigins, originAllowed } from '../../libs/browser/index.js';
import { continuationToken, parseContinuation } from '../../libs/browser/observation.js';
import { MAX_POLLS, nextPollAtMs } from '../../libs/browser/predicate.js';
import {
  leavesAtHeaders,
  RequestTracker,
  SETTLE_SNAPSHOT_LIMIT,
} from '../../libs/browser/request-tracker.js';
import { actArgsSchema, type ObservedElement, observeArgsSchema } from '../../libs/contracts/index.js';

const button = (name: string, state: ObservedElement['state'] = {}, ref = 'e1'): ObservedElement => ({
  ref,
  role: 'button',
  name,
  state,
});

describe('predicate matching (ADR-0159)', () => {
  it('is satisfied by exactly one visible control of that role, name and state', () => {
    const elements = [button('Save', { disabled: true }), button('Cancel', {}, 'e2')];
    expect(matchPredicate(elements, { role: 'button', name: 'Save' })).toBe('satisfied');
    expect(matchPredicate(elements, { role: 'button', name: 'Save', disabled: true })).toBe('satisfied');
    expect(matchPredicate(elements, { role: 'button', name: 'Save', disabled: false })).toBe('not_observed');
    expect(matchPredicate(elements, { role: 'link', name: 'Save' })).toBe('not_observed');
    expect(matchPredicate(elements, { role: 'button', name: 'save' })).toBe('not_observed');
  });

  it('treats a missing checked state as unchecked', () => {
    const box = { ref: 'e1', role: 'checkbox', name: 'Agree', state: {} };
    expect(matchPredicate([box], { role: 'checkbox', name: 'Agree', checked: false })).toBe('satisfied');
    expect(matchPredicate([box], { role: 'checkbox', name: 'Agree', checked: true })).toBe('not_observed');
  });

  it('is ambiguous for two controls of the same role and name, whatever their state', () => {
    const elements = [button('Delete'), button('Delete', { disabled: true }, 'e2')];
    expect(matchPredicate(elements, { role: 'button', name: 'Delete', disabled: true })).toBe('ambiguous');
  });

  it('schedules polls at least 250 ms apart, before the wait ends, at most 20 times', () => {
    expect(nextPollAtMs(1_000, 0, 2_000)).toBe(1_250);
    expect(nextPollAtMs(1_800, 3, 2_000)).toBeNull();
    expect(nextPollAtMs(1_000, MAX_POLLS, 100_000)).toBeNull();
    expect(nextPollAtMs(1_000, MAX_POLLS - 1, 100_000)).toBe(1_250);
  });
});

describe('the evidence key (ADR-0130 d7)', () => {
  const page = { url: 'https://a.test/', title: 'A', text: 'hello', elements: [button('Save')] };

  it('ignores the revision and the references', () => {
    expect(evidenceKey({ ...page, elements: [button('Save', {}, 'e9')] })).toBe(evidenceKey(page));
  });

  it('changes with the url, title, text, and any element role, name or state', () => {
    const key = evidenceKey(page);
    expect(evidenceKey({ ...page, url: 'https://a.test/b' })).not.toBe(key);
    expect(evidenceKey({ ...page, title: 'B' })).not.toBe(key);
    expect(evidenceKey({ ...page, text: 'hello!' })).not.toBe(key);
    expect(evidenceKey({ ...page, elements: [button('Save', { disabled: true })] })).not.toBe(key);
    expect(evidenceKey({ ...page, elements: [{ ...button('Save'), role: 'link' }] })).not.toBe(key);
    expect(evidenceKey({ ...page, elements: [button('Save'), button('More')] })).not.toBe(key);
  });
});

/** A stand-in for a Playwright page: only the events and the main frame the tracker uses. */
function fakePage() {
  const emitter = new EventEmitter();
  const mainFrame = { isDetached: () => false };
  const page = Object.assign(emitter, { mainFrame: () => mainFrame }) as unknown as Page;
  const request = (type: string, navigation = false) =>
    ({
      resourceType: () => type,
      isNavigationRequest: () => navigation,
      frame: () => mainFrame,
    }) as unknown as Request;
  return { page, emitter, request, mainFrame };
}

describe('request bookkeeping for settling (ADR-0159)', () => {
  it('tracks only document, script, stylesheet, fetch and XHR requests', () => {
    const { page, emitter, request } = fakePage();
    const tracker = new RequestTracker(page);
    for (const type of [
      'document',
      'script',
      'stylesheet',
      'fetch',
      'xhr',
      'image',
      'font',
      'eventsource',
      'media',
    ]) {
      emitter.emit('request', request(type));
    }
    expect(tracker.inFlightCount).toBe(5);
  });

  it("knows a document loaded from the browser's events: after its load, until a navigation starts", () => {
    const { page, emitter, request, mainFrame } = fakePage();
    const tracker = new RequestTracker(page);
    // Created on a page whose document it never saw load: unknown, so settling asks the page.
    expect(tracker.loadedNow).toBe(false);
    emitter.emit('load');
    expect(tracker.loadedNow).toBe(true);
    emitter.emit('request', request('document', true));
    expect(tracker.loadedNow).toBe(false);
    emitter.emit('framenavigated', mainFrame);
    // The new document has committed and not loaded yet.
    expect(tracker.loadedNow).toBe(false);
    emitter.emit('load');
    expect(tracker.loadedNow).toBe(true);
  });

  it('overflows a snapshot past 256 requests, and later requests never join it', () => {
    const { page, emitter, request } = fakePage();
    const tracker = new RequestTracker(page);
    for (let i = 0; i < 300; i += 1) emitter.emit('request', request('fetch'));
    const snapshot = tracker.snapshot();
    expect(snapshot.pending.size).toBe(SETTLE_SNAPSHOT_LIMIT);
    expect(snapshot.overflowed).toBe(true);

    const small = new RequestTracker(fakePage().page).snapshot();
    expect(small.overflowed).toBe(false);
  });

  it('drains when the snapshot requests finish or fail, ignoring requests that came later', () => {
    const { page, emitter, request } = fakePage();
    const tracker = new RequestTracker(page);
    const first = request('fetch');
    const second = request('script');
    emitter.emit('request', first);
    emitter.emit('request', second);
    const snapshot = tracker.snapshot();
    emitter.emit('request', request('fetch'));
    emitter.emit('requestfinished', first);
    expect(tracker.drained(snapshot)).toBe(false);
    emitter.emit('requestfailed', second);
    expect(tracker.drained(snapshot)).toBe(true);
    expect(tracker.inFlightCount).toBe(1);
  });

  it('lets event streams and bodiless replies leave at their headers', () => {
    expect(leavesAtHeaders(200, 'text/event-stream; charset=utf-8')).toBe(true);
    expect(leavesAtHeaders(204, undefined)).toBe(true);
    expect(leavesAtHeaders(304, 'application/json')).toBe(true);
    expect(leavesAtHeaders(200, 'application/json')).toBe(false);
  });

  it('clears the set when a new main-frame document commits, not on a same-document navigation', () => {
    const { page, emitter, request, mainFrame } = fakePage();
    const tracker = new RequestTracker(page);
    emitter.emit('request', request('fetch'));
    emitter.emit('framenavigated', mainFrame);
    expect(tracker.inFlightCount).toBe(1);
    emitter.emit('request', request('document', true));
    expect(tracker.navigationPending).toBe(true);
    emitter.emit('framenavigated', mainFrame);
    expect(tracker.inFlightCount).toBe(0);
    expect(tracker.documents).toBe(1);
    expect(tracker.navigationPending).toBe(false);
  });
});

describe('arguments and continuation tokens', () => {
  it('gives a predicate 2,000 ms unless told, and refuses more than 5,000', () => {
    const parsed = observeArgsSchema.parse({ wait_for: { role: 'button', name: 'Go' } });
    expect(parsed.wait_for?.wait_ms).toBe(2_000);
    expect(
      observeArgsSchema.safeParse({ wait_for: { role: 'button', name: 'Go', wait_ms: 5_001 } }).success,
    ).toBe(false);
    expect(
      actArgsSchema.safeParse({ revision: 'r', element: 'e1', action: 'click', selector: '#x' }).success,
    ).toBe(false);
  });

  it('refuses wait_for together with continuation', () => {
    const both = { continuation: 'abc.1', wait_for: { role: 'button', name: 'Go' } };
    expect(observeArgsSchema.safeParse(both).success).toBe(false);
  });

  it('round-trips a continuation token and rejects a foreign one', () => {
    expect(parseContinuation(continuationToken('AbC_-9', 256))).toEqual({ revision: 'AbC_-9', offset: 256 });
    expect(parseContinuation('nonsense')).toBeNull();
  });

  it('normalizes allowed origins and matches URLs by origin', () => {
    const allowed = normalizeOrigins(['https://Example.com:443/', 'http://127.0.0.1:8080']);
    expect(originAllowed('https://example.com/a?b', allowed)).toBe(true);
    expect(originAllowed('http://127.0.0.1:8080/x', allowed)).toBe(true);
    expect(originAllowed('http://example.com/', allowed)).toBe(false);
    expect(originAllowed('javascript:alert(1)', allowed)).toBe(false);
    expect(() => normalizeOrigins(['not a url'])).toThrow();
  });
});
