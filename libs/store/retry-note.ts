import type { EarlierEffect, LedgerEntry } from '../contracts/index.js';

/**
 * Retry starts clean: a new attempt gets a fresh transcript holding the run's input and,
 * when earlier attempts dispatched effects, a note of them (tool, target, outcome), so a model does
 * not repeat them blindly. Built from the ledger (what was dispatched and how it ended) and the old
 * transcripts (what each call aimed at). Never a typed text (it may be a password), never an
 * evidence key (the ledger and transcript hold none).
 */

/** The transcript entries this builder reads; the store keeps them as JSON it does not own. */
interface StoredEntry {
  kind?: unknown;
  toolCalls?: Array<{ name?: unknown; args?: Record<string, unknown> }>;
  outcome?: { ok?: unknown; result?: { observation?: { elements?: unknown } } };
}

/** Tools whose call changes something outside the run; observing does not. */
const EFFECT_TOOLS = new Set(['browser.navigate', 'browser.act', 'agent.delegate']);

/** Ledger states past the watermark: the effect may have happened (DESIGN §3). */
const DISPATCHED_STATES = new Set(['dispatched', 'completed', 'outcome_unknown']);

/** Longest target kept in a note; a longer URL is cut. */
const TARGET_MAX_CHARS = 300;

/**
 * The effects the ledger says earlier attempts dispatched, each with its target read from that
 * attempt's transcript (`transcripts[attempt]`). A call the ledger shows completed with a refusal
 * before any dispatch is still listed: its outcome says it failed, and the model reads the code.
 */
export function earlierEffects(
  ledger: readonly LedgerEntry[],
  transcripts: ReadonlyMap<number, readonly unknown[]>,
): EarlierEffect[] {
  return ledger
    .filter((entry) => EFFECT_TOOLS.has(entry.tool) && DISPATCHED_STATES.has(entry.state))
    .map((entry) => ({
      attempt: entry.attempt,
      step: entry.step,
      tool: entry.tool,
      target: targetOf(transcripts.get(entry.attempt) ?? [], entry),
      outcome: outcomeOf(entry),
    }));
}

function outcomeOf(entry: LedgerEntry): string {
  if (entry.state !== 'completed') return entry.state;
  const result = entry.result as { ok?: unknown; code?: unknown } | null;
  return result?.ok === false ? `failed ${String(result.code)}` : 'completed';
}

/** A call's target: the URL it opened, the element it acted on as the page named it, a child's input. */
function targetOf(transcript: readonly unknown[], entry: LedgerEntry): string {
  const entries = transcript as readonly StoredEntry[];
  let turn = 0;
  let elements: Array<{ ref?: unknown; role?: unknown; name?: unknown }> = [];
  for (const stored of entries) {
    if (stored.kind === 'tool' && stored.outcome?.ok === true) {
      const seen = stored.outcome.result?.observation?.elements;
      if (Array.isArray(seen)) elements = seen;
    }
    if (stored.kind !== 'model') continue;
    turn += 1;
    if (turn !== entry.step) continue;
    const args = stored.toolCalls?.[entry.index]?.args ?? {};
    return cut(describe(entry.tool, args, elements));
  }
  return '';
}

function describe(
  tool: string,
  args: Record<string, unknown>,
  elements: Array<{ ref?: unknown; role?: unknown; name?: unknown }>,
): string {
  switch (tool) {
    case 'browser.navigate':
      return String(args.url ?? '');
    case 'browser.act': {
      const element = elements.find((candidate) => candidate.ref === args.element);
      // The action and the element alone: a fill's text may be a secret, so it is never repeated.
      return element
        ? `${String(args.action)} ${String(element.role)} "${String(element.name)}"`
        : `${String(args.action)} element ${String(args.element)}`;
    }
    case 'agent.delegate':
      return `child run: ${String(args.input ?? '')}`;
    default:
      return '';
  }
}

function cut(text: string): string {
  return text.length > TARGET_MAX_CHARS ? `${text.slice(0, TARGET_MAX_CHARS - 1)}…` : text;
}

/** The note entry of a new attempt's transcript, or undefined when no earlier effect was dispatched. */
export function retryNote(
  attempt: number,
  effects: readonly EarlierEffect[],
): { kind: 'input'; text: string; earlierEffects: EarlierEffect[] } | undefined {
  if (effects.length === 0) return undefined;
  const lines = effects.map(
    (effect) =>
      `- attempt ${effect.attempt}, step ${effect.step}: ${effect.tool} ${effect.target} → ${effect.outcome}`,
  );
  return {
    kind: 'input',
    text: [
      `This is attempt ${attempt} of this run. Earlier attempts already dispatched these effects;`,
      'look at the page before repeating any of them:',
      ...lines,
    ].join('\n'),
    earlierEffects: [...effects],
  };
}
