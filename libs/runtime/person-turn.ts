import { throwIfAborted } from './execution-interrupted.js';
import type { ExecutionEnd, Invocation, PersonAccount, RunLoopOptions } from './loop-ports.js';
import type { ToolOutcome, TranscriptEntry } from './model.js';
import { performCall } from './tool-run.js';

/**
 * A person on the run's page, as the loop meets it: a takeover asked at a safe point pauses the
 * run; a takeover handed back is told to the model before its next turn — how long, how many
 * inputs, the URL now, and the page as it is — never what the person typed.
 */

/** How long an observation after a hand-back may take. */
const OBSERVE_TIMEOUT_MS = 30_000;

/**
 * At a safe point (before a model turn, before a tool call): a takeover asked of the run parks it
 * on a held `person` approval. Undefined when none was asked or the page could not be handed over.
 */
export async function pauseIfTakenOver(options: RunLoopOptions): Promise<ExecutionEnd | undefined> {
  const holder = options.run.takeoverRequested?.();
  if (!holder || !options.policy.pauseForPerson) return undefined;
  const approvalId = await options.policy.pauseForPerson(holder);
  return approvalId ? { kind: 'parked', approvalId } : undefined;
}

/** The account as a step and a tool answer keep it (personStepSchema), with the words a model reads. */
export function personAnswer(account: PersonAccount): { person: Record<string, unknown>; note: string } {
  const heldSeconds = Math.max(0, Math.round((account.endedAtMs - account.sinceMs) / 1000));
  const inputs = account.inputs === null ? 'an unknown number of' : String(account.inputs);
  return {
    person: {
      holder: account.holder,
      since_ms: account.sinceMs,
      ended_at_ms: account.endedAtMs,
      inputs: account.inputs,
      start_url: account.startUrl,
      end_url: account.endUrl,
    },
    note: `A person held the page for ${heldSeconds} s and sent ${inputs} inputs; the page is now at ${account.endUrl ?? 'an unknown URL'}. What they typed is not told. The observation below is the page as they left it: act on its revision.`,
  };
}

/** The page as it is now, for a model told of a person's takeover; a failure is told in its place. */
async function freshObservation(options: RunLoopOptions, invocationId: string, clock: () => number) {
  throwIfAborted(options.signal);
  // The evidence and screenshot of this read belong to no call of the model: only its outcome is kept.
  const { outcome } = await performCall(
    options.tools,
    { id: `${invocationId}-observe`, name: 'browser.observe', args: {} },
    {
      invocationId: `${invocationId}-observe`,
      deadlineMs: Math.min(options.deadlineMs, clock() + OBSERVE_TIMEOUT_MS),
      signal: options.signal,
      beforeDispatch: async () => undefined,
    },
  );
  return outcome;
}

/**
 * `browser.request_person`, approved: the answer the model gets once the person handed the page
 * back (or its owner answered without taking it over).
 */
export async function answerPersonRequest(
  invocation: Invocation,
  approvalId: string | undefined,
  options: RunLoopOptions,
  clock: () => number,
): Promise<ToolOutcome> {
  const account = approvalId ? await options.policy.personAccount?.(approvalId) : undefined;
  const observed = await freshObservation(options, invocation.id, clock);
  const observation = observed.ok
    ? (observed.result as { observation?: unknown } | undefined)?.observation
    : undefined;
  if (!account)
    return {
      ok: true,
      result: {
        person: null,
        note: 'The owner answered without taking the page over.',
        ...(observation !== undefined ? { observation } : {}),
      },
    };
  return {
    ok: true,
    result: { ...personAnswer(account), ...(observation !== undefined ? { observation } : {}) },
  };
}

/**
 * Before a model turn: each takeover of the running run handed back since the model last heard of
 * one is told to it, once, as a note in its transcript with the page as it is now.
 */
export async function tellTakeovers(
  transcript: TranscriptEntry[],
  options: RunLoopOptions,
  clock: () => number,
): Promise<void> {
  if (!options.policy.takeoversToTell) return;
  const told = new Set(
    transcript.flatMap((entry) =>
      entry.kind === 'input' && entry.personApprovalId ? [entry.personApprovalId] : [],
    ),
  );
  for (const { approvalId, account } of await options.policy.takeoversToTell(told)) {
    const observed = await freshObservation(options, `${options.run.runId}-${approvalId}`, clock);
    const observation = observed.ok
      ? (observed.result as { observation?: unknown } | undefined)?.observation
      : undefined;
    const { note } = personAnswer(account);
    const entry: TranscriptEntry = {
      kind: 'input',
      text: observation === undefined ? note : `${note}\n${JSON.stringify(observation)}`,
      personApprovalId: approvalId,
      ...(observation !== undefined ? { observation } : {}),
    };
    transcript.push(entry);
    await options.run.appendTranscript(entry);
  }
}
