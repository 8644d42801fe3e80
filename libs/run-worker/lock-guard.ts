import type { Job } from 'bullmq';
import type { JobLocks } from '../../queues/index.js';
import { LeaseholdError } from '../contracts/index.js';
import { isRedisUnreachable, type RedisLinkView, redisLink } from '../telemetry/redis-link.js';
import { RunLost } from './run-lost.js';

/** How often a call held back for a due renewal looks again. */
const WAIT_STEP_MS = 100;

/**
 * The execution stopped before a call: its Redis does not answer, or its job lock may lapse before
 * the call's mark lands. Nothing was dispatched; the run is handed back once Redis answers.
 */
export class DispatchHeld extends LeaseholdError<'interrupted'> {
  override readonly name = 'DispatchHeld';
  constructor(message: string) {
    super('interrupted', message, true);
  }
}

/**
 * Whether an execution stopped on a Redis outage: held back before a call, or one of its commands
 * unanswered in the bound (ioredis' command timeout). Other lost connections (a browser worker's)
 * keep their own handling.
 */
export function stoppedByOutage(error: unknown): boolean {
  return error instanceof DispatchHeld || (error instanceof Error && error.message === 'Command timed out');
}

/**
 * The checks one execution makes against its job's lock (`JobLocks`, fed by BullMQ's renewals):
 * before each call is marked dispatched, and before a call's answer is written.
 */
export interface LockGuard {
  /** Resolves when a call may go out; throws {@link DispatchHeld} when it may not. */
  beforeDispatch(): Promise<void>;
  /**
   * Resolves when this worker may write a call's answer: at once while the lock is trusted, else
   * once Redis answers and the lock proves still ours. Throws {@link RunLost} when it is not: the
   * next owner continues the run, and this worker writes nothing more.
   */
  beforeAnswer(): Promise<void>;
}

export function lockGuard(
  locks: JobLocks,
  job: Pick<Job, 'id' | 'extendLock'>,
  token: string | undefined,
  signal: AbortSignal,
  link: RedisLinkView = redisLink,
): LockGuard {
  const jobId = job.id ?? '';
  const verdict = () => locks.verdict(jobId, { answerBoundMs: link.answerTimeoutMs, redisUp: link.up });
  return {
    async beforeDispatch() {
      for (let now = verdict(); now !== 'dispatch'; now = verdict()) {
        if (now === 'stop' || signal.aborted)
          throw new DispatchHeld(
            link.up
              ? 'the job lock may lapse before the call is marked; the call was not sent'
              : 'Redis does not answer; the call was not sent',
          );
        await new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS));
      }
    },
    async beforeAnswer() {
      if (verdict() !== 'stop') return;
      const lock = await lockAfterOutage(locks, job, token, signal, link);
      if (lock === 'lost')
        throw new RunLost('the job lock lapsed while Redis did not answer; the next owner continues');
      // Stopping meanwhile: the stop hands the run back, the answer unwritten.
      if (lock === 'stopped') throw new DispatchHeld('the worker stopped while Redis did not answer');
    },
  };
}

/**
 * Once Redis answers, whether the job's lock is still this worker's (`held`, renewed for a whole
 * lock: BullMQ's extendLock answers 1 only to the lock's holder) or not (`lost`); `stopped` when
 * the worker stops first. A renewal that gets no answer is asked again once Redis answers: a
 * command can time out before the link watch has seen the outage, and a lock taken for lost while
 * it is still held would leave the run to nobody.
 */
export async function lockAfterOutage(
  locks: JobLocks,
  job: Pick<Job, 'id' | 'extendLock'>,
  token: string | undefined,
  signal: AbortSignal,
  link: RedisLinkView = redisLink,
): Promise<'held' | 'lost' | 'stopped'> {
  if (!token || !job.id) return 'lost';
  const stopped = new Promise<'stopped'>((resolve) => {
    if (signal.aborted) resolve('stopped');
    signal.addEventListener('abort', () => resolve('stopped'), { once: true });
  });
  for (;;) {
    if ((await Promise.race([link.whenUp(), stopped])) === 'stopped') return 'stopped';
    const sentAtMs = Date.now();
    try {
      if (!(await job.extendLock(token, locks.lockDurationMs))) return 'lost';
      locks.renewed([job.id], sentAtMs);
      return 'held';
    } catch (error) {
      if (!isRedisUnreachable(error)) return 'lost';
      await Promise.race([new Promise((resolve) => setTimeout(resolve, WAIT_STEP_MS)), stopped]);
    }
  }
}
