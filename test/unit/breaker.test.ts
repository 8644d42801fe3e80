import { describe, expect, it } from 'vitest';
import {
  IDENTICAL_CALL_THRESHOLD,
  LoopBreaker,
  type LoopBreakerSnapshot,
  MAX_EVIDENCE_RESTARTS,
} from '../../libs/runtime/index.js';

const SECRET = 'test-breaker-secret';
const observe = { name: 'browser.observe', args: {} };
let nextId = 0;
const invocation = (call: { name: string; args: Record<string, unknown> }) => ({
  id: `inv-${++nextId}`,
  call,
});

/** One call through the breaker as the loop makes it: admitted before dispatch, completed after. */
function callOnce(
  breaker: LoopBreaker,
  call: { name: string; args: Record<string, unknown> },
  evidenceKey?: string | null,
) {
  const inv = invocation(call);
  const verdict = breaker.admit(inv);
  if (verdict.ok) breaker.complete(inv, evidenceKey);
  return verdict;
}

/** How many identical calls the breaker lets through before it refuses one. */
function allowedBeforeRefusal(breaker: LoopBreaker, keyOf: (n: number) => string | null | undefined) {
  for (let n = 1; n <= 1000; n += 1) if (!callOnce(breaker, observe, keyOf(n)).ok) return n - 1;
  throw new Error('the breaker never refused');
}

describe('loop breaker (ADR-0130 d7)', () => {
  it('refuses the fifth identical call before it is dispatched', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 4; n += 1) expect(callOnce(breaker, observe, null)).toEqual({ ok: true });
    expect(callOnce(breaker, observe, null)).toMatchObject({ ok: false, reason: 'loop_detected' });
    expect(IDENTICAL_CALL_THRESHOLD).toBe(5);
  });

  it('treats arguments that differ only in key order as identical, and other arguments or tools as different', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    const a = { name: 'browser.act', args: { revision: 'r', element: 'e1', action: 'click' } };
    const sameInOtherOrder = { name: 'browser.act', args: { action: 'click', element: 'e1', revision: 'r' } };
    for (let n = 1; n <= 2; n += 1) callOnce(breaker, a);
    for (let n = 1; n <= 2; n += 1) callOnce(breaker, sameInOtherOrder);
    for (let n = 1; n <= 4; n += 1) {
      expect(callOnce(breaker, { name: 'browser.act', args: { ...a.args, element: 'e2' } }).ok).toBe(true);
      expect(callOnce(breaker, { name: 'other.tool', args: a.args }).ok).toBe(true);
    }
    expect(callOnce(breaker, a)).toMatchObject({ ok: false, reason: 'loop_detected' });
  });

  it('does not count a changing page as a loop', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 20; n += 1) expect(callOnce(breaker, observe, `page-${n}`).ok).toBe(true);
  });

  it('fails an unchanged page at the fifth identical observation', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    expect(allowedBeforeRefusal(breaker, () => 'same-page')).toBe(4);
  });

  it('restarts the count when the page changes after repeated observations of the same page', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 4; n += 1) expect(callOnce(breaker, observe, 'lesson-1').ok).toBe(true);
    // The fifth is refused on the count alone: a restart happens on a result, never before dispatch.
    expect(breaker.admit(invocation(observe)).ok).toBe(false);
    const fresh = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 3; n += 1) callOnce(fresh, observe, 'lesson-1');
    expect(callOnce(fresh, observe, 'lesson-2').ok).toBe(true); // 4th, new page: count back to 1
    for (let n = 1; n <= 3; n += 1) expect(callOnce(fresh, observe, 'lesson-2').ok).toBe(true);
    expect(callOnce(fresh, observe, 'lesson-2')).toMatchObject({ ok: false, reason: 'loop_detected' });
  });

  it('stops restarting after 32 restarts, so a page changing on every observation allows 36 identical observations', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    expect(MAX_EVIDENCE_RESTARTS).toBe(32);
    expect(allowedBeforeRefusal(breaker, (n) => `page-${n}`)).toBe(36);
    expect(breaker.snapshot().restarts).toBe(32);
  });

  it('counts restarts across every call of the run together', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    const other = { name: 'browser.observe', args: { continuation: 'c1' } };
    for (let n = 1; n <= 17; n += 1) callOnce(breaker, other, `other-${n}`); // 16 restarts
    expect(breaker.snapshot().restarts).toBe(16);
    expect(allowedBeforeRefusal(breaker, (n) => `page-${n}`)).toBe(4 + 16);
  });

  it('spends no restart on a first result, which lowers no count', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 40; n += 1)
      callOnce(breaker, { name: 'browser.navigate', args: { url: `https://a.test/${n}` } }, `page-${n}`);
    expect(breaker.snapshot().restarts).toBe(0);
    expect(allowedBeforeRefusal(breaker, (n) => `page-${n}`)).toBe(36);
  });

  it('keeps the plain count for tools without an evidence key', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    expect(allowedBeforeRefusal(breaker, (n) => (n % 2 ? null : undefined))).toBe(4);
  });

  it('keeps the recorded key across a failed result, which carries none', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    callOnce(breaker, observe, 'page-a');
    callOnce(breaker, observe, null); // a failure: no evidence, count 2
    callOnce(breaker, observe, 'page-a'); // the same page again: no restart, count 3
    expect(breaker.snapshot().restarts).toBe(0);
    expect(callOnce(breaker, observe, 'page-a').ok).toBe(true);
    expect(callOnce(breaker, observe, 'page-a').ok).toBe(false);
  });

  it('counts one invocation once, however often it is admitted or completed', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    const inv = invocation(observe);
    for (let n = 1; n <= 6; n += 1) expect(breaker.admit(inv)).toEqual({ ok: true });
    breaker.complete(inv, 'page-a');
    breaker.complete(inv, 'page-b');
    expect(breaker.snapshot().restarts).toBe(0);
    expect(allowedBeforeRefusal(breaker, () => 'page-a')).toBe(3);
  });

  it('restarts the count on the batch completed after an approval, in a new execution restored from the snapshot', () => {
    const before = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 3; n += 1) callOnce(before, observe, 'exercise-1');
    // The next turn asks for [act, observe]; act needs approval, so the run parks after admitting it.
    const act = invocation({ name: 'browser.act', args: { revision: 'r3', element: 'e4', action: 'click' } });
    const observeAfter = invocation(observe);
    expect(before.admit(act).ok).toBe(true);
    const stored: LoopBreakerSnapshot = JSON.parse(JSON.stringify(before.snapshot()));

    const after = LoopBreaker.restore(stored, { evidenceSecret: SECRET });
    expect(after.admit(act).ok).toBe(true); // the approved call was counted before the park
    after.complete(act, 'exercise-2');
    expect(after.admit(observeAfter).ok).toBe(true); // the 4th identical observe
    after.complete(observeAfter, 'exercise-2'); // a new page: its count restarts at one
    expect(after.snapshot().restarts).toBe(1);
    expect(allowedBeforeRefusal(after, () => 'exercise-2')).toBe(3);
  });

  it('never puts the evidence key in its snapshot or its refusal', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    const key = 'f00dfeed'.repeat(8);
    let verdict = callOnce(breaker, observe, key);
    for (let n = 1; n <= 4 && verdict.ok; n += 1) verdict = callOnce(breaker, observe, key);
    expect(verdict.ok).toBe(false);
    const stored = JSON.stringify(breaker.snapshot());
    expect(stored).not.toContain(key);
    expect(stored).not.toContain(SECRET);
    expect(JSON.stringify(verdict)).not.toContain(key);
  });

  it('refuses to restore a snapshot under another secret, whose digests could never match', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    callOnce(breaker, observe, 'page-a');
    expect(() => LoopBreaker.restore(breaker.snapshot(), { evidenceSecret: 'another' })).toThrow(
      /another evidence secret/,
    );
  });

  it('refuses to restore a stored value that is not a breaker snapshot', () => {
    expect(() => LoopBreaker.restore({ version: 2 }, { evidenceSecret: SECRET })).toThrow();
  });

  it('counts a call the ledger completed before a crash the snapshot missed, without refusing it', () => {
    const breaker = new LoopBreaker({ evidenceSecret: SECRET });
    for (let n = 1; n <= 4; n += 1) breaker.recordReplayed(invocation(observe));
    breaker.recordReplayed(invocation(observe)); // already dispatched: counted, never refused
    expect(breaker.admit(invocation(observe)).ok).toBe(false);
  });
});
