import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { canonicalJson, sha256Hex } from '../contracts/canonical-json.js';

/**
 * The identical-call breaker (DESIGN §7, ADR-0130 d7): identical calls — the same tool name and the
 * same arguments as canonical JSON — fail the run at the fifth, unless new evidence restarts the
 * count. The count is checked before a call is dispatched (`admit`), so the refused call is never
 * sent; the evidence arrives with the call's result (`complete`).
 */

/** The fifth identical call fails the run. Unchanged by ADR-0130 (evaluation case 11 holds). */
export const IDENTICAL_CALL_THRESHOLD = 5;

/**
 * Restarts a run may spend, over all its calls together (ADR-0130 d7). A code constant, not a
 * configuration knob: raising it weakens loop detection. With it, a page that changes on every
 * observation allows 1 + 32 + 3 = 36 identical observations before the breaker fails the run.
 */
export const MAX_EVIDENCE_RESTARTS = 32;

export interface BreakerCall {
  name: string;
  args: Record<string, unknown>;
}

/** A call with its durable invocation id (the loop's `Invocation` fits). */
export interface BreakerInvocation {
  id: string;
  call: BreakerCall;
}

export type BreakerVerdict = { ok: true } | { ok: false; reason: 'loop_detected'; detail: string };

/**
 * The breaker's state as plain JSON, for the run to store beside its ledger, parsed by this schema
 * when read back. It never holds an evidence key, the secret, or the calls' arguments: calls are
 * named by a SHA-256 of their fingerprint, evidence by an HMAC under the secret, so a reader of the
 * store can neither recover a key nor, without the secret, test a guessed page against it.
 */
export const loopBreakerSnapshotSchema = z.object({
  version: z.literal(1),
  /** HMAC of a fixed label: tells a restore that it holds the secret the digests were made with. */
  secretCheck: z.string(),
  /** Restarts spent in this run. */
  restarts: z.number().int().min(0).max(MAX_EVIDENCE_RESTARTS),
  calls: z.array(
    z.object({
      fingerprint: z.string(),
      count: z.number().int().nonnegative(),
      evidence: z.string().nullable(),
    }),
  ),
  /** Invocations counted, and whether their result was applied: admitting or completing twice is a no-op. */
  invocations: z.record(z.string(), z.enum(['admitted', 'completed'])),
});
export type LoopBreakerSnapshot = z.output<typeof loopBreakerSnapshotSchema>;

export interface LoopBreakerOptions {
  /**
   * Keys the evidence digests kept in the snapshot. It must be the same for every execution of a
   * run and must not be stored beside the snapshot: derive it, e.g. as HMAC(deployment secret, run
   * id). A restore under another secret is refused, since its digests could never match.
   */
  evidenceSecret: string;
}

interface CallState {
  count: number;
  evidence: string | null;
}

const SECRET_CHECK_LABEL = 'leasehold.loop-breaker.v1';

export class LoopBreaker {
  readonly #secret: string;
  #restarts = 0;
  readonly #calls = new Map<string, CallState>();
  readonly #invocations = new Map<string, 'admitted' | 'completed'>();

  constructor(options: LoopBreakerOptions) {
    this.#secret = options.evidenceSecret;
  }

  /** Rebuilds the breaker of a resumed run from its stored snapshot (parsed; a bad one throws). */
  static restore(stored: unknown, options: LoopBreakerOptions): LoopBreaker {
    const breaker = new LoopBreaker(options);
    breaker.restoreFrom(stored);
    return breaker;
  }

  /** Replaces this breaker's state with a stored snapshot's (parsed; a bad one throws). */
  restoreFrom(stored: unknown): void {
    const snapshot = loopBreakerSnapshotSchema.parse(stored);
    if (snapshot.secretCheck !== this.#digest(SECRET_CHECK_LABEL))
      throw new RangeError('the breaker snapshot was made under another evidence secret');
    this.#restarts = snapshot.restarts;
    this.#calls.clear();
    this.#invocations.clear();
    for (const call of snapshot.calls)
      this.#calls.set(call.fingerprint, { count: call.count, evidence: call.evidence });
    for (const [id, state] of Object.entries(snapshot.invocations)) this.#invocations.set(id, state);
  }

  /**
   * Before dispatch: counts the call, or refuses it when it would be the fifth identical one.
   * Admitting an invocation already counted (a call approved after a park, a resumed execution)
   * answers `ok` without counting it again. A refused call is not counted: the run fails on it.
   */
  admit(invocation: BreakerInvocation): BreakerVerdict {
    if (this.#invocations.has(invocation.id)) return { ok: true };
    const fingerprint = callFingerprint(invocation.call);
    const state = this.#calls.get(fingerprint) ?? { count: 0, evidence: null };
    if (state.count + 1 >= IDENTICAL_CALL_THRESHOLD)
      return {
        ok: false,
        reason: 'loop_detected',
        detail: `${invocation.call.name} was called ${IDENTICAL_CALL_THRESHOLD} times with the same arguments and no new evidence`,
      };
    this.#calls.set(fingerprint, { ...state, count: state.count + 1 });
    this.#invocations.set(invocation.id, 'admitted');
    return { ok: true };
  }

  /**
   * After the call's result: a successful result's evidence key (null or undefined for a failure or
   * a tool without one). A key different from the one recorded for that call restarts its count at
   * one — spending a restart only when that lowers the count, and only while restarts remain. The
   * key is kept as a digest only. Completing an invocation twice applies its evidence once.
   */
  complete(invocation: BreakerInvocation, evidenceKey: string | null | undefined): void {
    if (this.#invocations.get(invocation.id) !== 'admitted') return;
    this.#invocations.set(invocation.id, 'completed');
    if (evidenceKey === null || evidenceKey === undefined) return;
    const fingerprint = callFingerprint(invocation.call);
    const state = this.#calls.get(fingerprint);
    if (!state) return;
    const evidence = this.#digest(evidenceKey);
    const changed = state.evidence !== null && state.evidence !== evidence;
    const restart = changed && state.count > 1 && this.#restarts < MAX_EVIDENCE_RESTARTS;
    if (restart) this.#restarts += 1;
    this.#calls.set(fingerprint, { count: restart ? 1 : state.count, evidence });
  }

  /**
   * A call the ledger shows completed (or dispatched) that the stored snapshot does not know — the
   * worker died before it stored the snapshot. It is counted, never refused (it was sent already),
   * and its evidence is unknown, so it restarts nothing.
   */
  recordReplayed(invocation: BreakerInvocation): void {
    if (this.#invocations.has(invocation.id)) return;
    const fingerprint = callFingerprint(invocation.call);
    const state = this.#calls.get(fingerprint) ?? { count: 0, evidence: null };
    this.#calls.set(fingerprint, { ...state, count: state.count + 1 });
    this.#invocations.set(invocation.id, 'completed');
  }

  snapshot(): LoopBreakerSnapshot {
    return {
      version: 1,
      secretCheck: this.#digest(SECRET_CHECK_LABEL),
      restarts: this.#restarts,
      calls: [...this.#calls].map(([fingerprint, state]) => ({ fingerprint, ...state })),
      invocations: Object.fromEntries(this.#invocations),
    };
  }

  #digest(text: string): string {
    return createHmac('sha256', this.#secret).update(text, 'utf8').digest('base64url');
  }
}

/** The identity of a call: its tool name and its arguments as canonical JSON (keys sorted). */
function callFingerprint(call: BreakerCall): string {
  return sha256Hex(canonicalJson([call.name, call.args]));
}
