import { UnrecoverableError } from 'bullmq';
import type { RunJobResult } from '../../queues/index.js';
import type { RunView } from '../contracts/index.js';
import type { ExecutionEnd } from '../runtime/index.js';

/**
 * The queue tells the truth: an execution's job returns the run's status and error
 * code, as the store has them now (`run`, read after the end), and a failed run's job fails
 * (unrecoverable: BullMQ never retries it) after its end is recorded, so Bull Board lists it under
 * Failed with its code. The end itself was counted once by the lifecycle, where this execution
 * recorded it.
 */
export function jobResult(end: ExecutionEnd, run: RunView | undefined): RunJobResult {
  const status = run?.status ?? end.kind;
  const code = run?.error?.code ?? null;
  const endedHere = end.kind === 'succeeded' || end.kind === 'failed' || end.kind === 'cancelled';
  if (endedHere && status === 'failed')
    throw new UnrecoverableError(`run failed: ${code ?? 'unknown'}: ${run?.error?.message ?? ''}`);
  return { status, code };
}
