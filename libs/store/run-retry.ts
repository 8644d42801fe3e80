import { inputText, type RunView, recordIdSchema } from '../contracts/index.js';
import { listInvocations } from './ledger.js';
import { earlierEffects, retryNote } from './retry-note.js';
import { indexRetriedRun, reindexFromRecord } from './run-deadlines.js';
import type { RunStoreContext } from './run-keys.js';
import { getRun } from './run-reads.js';
import { runScriptKeys } from './run-retention.js';
import { keepRunIndexes } from './run-submit.js';
import { readTranscript } from './run-transcript.js';
import { type RunTransition, toTransition } from './run-transition.js';
import { slotBatch } from './slot-batch.js';

/**
 * A failed run as a new attempt: attempt + 1, a new execution, `queued`, on a fresh transcript
 * that holds the input and a note of the effects earlier attempts dispatched; the
 * failed attempt's transcript is kept under its number (`RunTranscripts.loadAttempt`).
 */
export async function retryRun(
  context: RunStoreContext,
  tenant: string,
  runId: string,
): Promise<RunTransition<'queued'>> {
  if (!recordIdSchema.safeParse(runId).success) return toTransition(runId, ['not_found', '', []], '');
  const failed = await getRun(context, runId, tenant);
  if (!failed) return toTransition(runId, ['not_found', '', []], '');
  const entries = await freshTranscript(context, failed);
  const now = context.now();
  // Indexed at its new deadline before the script sets it (see run-deadlines.ts).
  const indexed = await indexRetriedRun(context, runId, tenant, now);
  const { redis, keys } = context;
  // The retried run lives on: so do the indexes that list it (see keepRunIndexes).
  const indexes = slotBatch(redis);
  keepRunIndexes(indexes, context, tenant, failed.session_id, failed.deadline_at_ms - failed.created_at_ms);
  await indexes.exec();
  // The script refuses (`stale_execution`) if another retry moved the attempt since the read.
  // It holds every key the run owns, the new attempt's archive included: the failed run's keys
  // were set to expire at its end, and the retry keeps them again.
  const own = [
    keys.run(runId),
    keys.events(runId),
    keys.transcript(runId),
    keys.attemptTranscript(runId, failed.attempt),
    keys.loopState(runId),
  ];
  const reply = await redis.retryRun(
    ...(await runScriptKeys(context, runId, own, failed.attempt + 1)),
    now,
    tenant,
    failed.attempt,
    ...entries.map((entry) => JSON.stringify(entry)),
  );
  const transition = toTransition<'queued'>(runId, reply, 'failed');
  if (!transition.ok && indexed) await reindexFromRecord(context, runId);
  return transition;
}

/** A new attempt's first entries: the input, and the note of what earlier attempts dispatched. */
async function freshTranscript(context: RunStoreContext, run: RunView): Promise<unknown[]> {
  const { redis, keys } = context;
  const transcripts = new Map<number, unknown[]>();
  for (let attempt = 1; attempt <= run.attempt; attempt += 1) {
    const key = attempt === run.attempt ? keys.transcript(run.id) : keys.attemptTranscript(run.id, attempt);
    transcripts.set(attempt, await readTranscript<unknown>(redis, key));
  }
  const effects = earlierEffects(await listInvocations(context, run.id), transcripts);
  const note = retryNote(run.attempt + 1, effects);
  return [{ kind: 'input', text: inputText(run.input) }, ...(note ? [note] : [])];
}
